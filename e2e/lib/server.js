// Starts the real agentdock binary for a test file and stops it afterwards.
// Each test file gets its own server on a free loopback port, so files can run
// in parallel and no test depends on another's sessions.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWikipedia } from './wikipedia.js';

const e2eDir = fileURLToPath(new URL('..', import.meta.url));

/** binaryPath is AGENTDOCK_BIN, relative to e2e/, or ../bin/agentdock. */
export function binaryPath() {
  return resolve(e2eDir, process.env.AGENTDOCK_BIN || '../bin/agentdock');
}

export function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One fake Wikipedia per test process: the servers' search asks it unless
// a test's env says otherwise (WIKIPEDIA_URL, another provider), so that
// no test reaches the network.
let wikipedia;
/** fakeWikipedia returns the process's fake Wikipedia (lib/wikipedia.js), started on first use. */
export function fakeWikipedia() {
  wikipedia ??= startWikipedia();
  return wikipedia;
}

/**
 * startServer runs `agentdock serve --addr 127.0.0.1:<port>` (or bin with
 * args and --addr) with the offline model's delay at 1 ms and search on the
 * fake Wikipedia, waits until
 * readyPath (/healthz) answers 200, and returns its
 * base URL and a stop function. The server's output is kept and shown when it
 * fails to start, since a test can only say "not ready" otherwise.
 */
export async function startServer({ env = {}, timeoutMs = 20000, bin = binaryPath(), args = ['serve'], readyPath = '/healthz' } = {}) {
  if (!existsSync(bin)) {
    throw new Error(`server binary not found at ${bin}: run "make build" in the repository root, or set AGENTDOCK_BIN`);
  }
  // A port picked free can be taken before the server binds it; try a few.
  let lastErr;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    // An env value of undefined removes the variable.
    const childEnv = { ...process.env, OFFLINE_MODEL_DELAY_MS: '1', WIKIPEDIA_URL: (await fakeWikipedia()).url, ...env };
    for (const [k, v] of Object.entries(childEnv)) if (v === undefined) delete childEnv[k];
    const child = spawn(bin, [...args, '--addr', `127.0.0.1:${port}`], {
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const keep = (d) => { output = (output + d).slice(-8000); };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let exited = null;
    const exit = new Promise((r) => child.on('exit', (code, signal) => { exited = { code, signal }; r(); }));

    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && !exited) {
      try {
        const res = await fetch(`${base}${readyPath}`);
        if (res.status === 200) {
          return {
            base,
            output: () => output,
            async stop() {
              if (exited) return;
              child.kill('SIGTERM');
              const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
              await exit;
              clearTimeout(killer);
            },
          };
        }
      } catch {
        // Not listening yet.
      }
      await sleep(50);
    }
    if (!exited) {
      child.kill('SIGKILL');
      await exit;
      throw new Error(`${bin} did not answer ${readyPath} within ${timeoutMs} ms; its output:\n${output}`);
    }
    lastErr = new Error(`${bin} exited (${JSON.stringify(exited)}) before answering ${readyPath}; its output:\n${output}`);
  }
  throw lastErr;
}

/** readFrames reads a whole SSE body into [{id, data}] (for assertions on the raw wire). */
export async function readFrames(res) {
  const { parseSSE } = await import('../../web/js/api.js');
  const frames = [];
  for await (const f of parseSSE(res.body)) frames.push(f);
  return frames;
}
