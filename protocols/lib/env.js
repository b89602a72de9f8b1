// What the protocol tests share: the agentdock binary (e2e's startServer),
// a redis-server of their own for the tests with two replicas, and the rule
// for a missing component: skip with a reason here, fail in CI.
import { spawn, spawnSync } from 'node:child_process';
import { freePort } from '../../e2e/lib/server.js';

export { startServer } from '../../e2e/lib/server.js';

/** missing skips the test t with a reason, or fails it when CI=true. */
export function missing(t, what) {
  if (process.env.CI === 'true') throw new Error(`${what} is required in CI`);
  t.skip(`${what} not found`);
}


/** hasRedis reports whether redis-server can be run. */
export function hasRedis() {
  return spawnSync('redis-server', ['--version']).status === 0;
}

/** startRedis runs a redis-server with no persistence on a free loopback port. */
export async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const deadline = Date.now() + 10000;
  for (;;) {
    const ok = await new Promise((r) => {
      const p = spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' });
      r(p.stdout?.trim() === 'PONG');
    });
    if (ok) break;
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`redis-server on ${port} did not answer`); }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `redis://127.0.0.1:${port}/0`,
    stop: () => new Promise((r) => { child.on('exit', r); child.kill('SIGTERM'); }),
  };
}
