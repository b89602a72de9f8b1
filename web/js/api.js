// The page's side of the wire contract: the agent list, the chat POST, the
// SSE framing of the AI SDK "UI message stream", and resuming a dropped stream
// from the last frame seen. Nothing here touches the DOM, so the same code runs
// under node in the e2e tests against the real server.

// pageBase is where the API lives: the directory the page was served from,
// without its trailing slash. The page at / calls /api/...; mounted under
// /agents/ it calls /agents/api/..., so an embedder can serve it under any
// prefix. Under node (the e2e tests) there is no page: callers pass base.
export const pageBase = typeof document === 'undefined' ? '' : new URL('.', document.baseURI).pathname.replace(/\/$/, '');

// The API key the page sends as x-api-key, when the server requires one.
let apiKey = '';

/** setApiKey sets the key sent with every request ('' sends none). */
export function setApiKey(key) {
  apiKey = String(key ?? '').trim();
}

function withKey(headers) {
  return apiKey ? { ...headers, 'x-api-key': apiKey } : headers;
}

/** An error the server reported (or a network failure), safe to show. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

// errorFrom turns a non-2xx response into an ApiError, reading the server's
// {"error":{"code","message"}} body when it has one.
async function errorFrom(res) {
  let code = `http_${res.status}`;
  let message = res.statusText || `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body && typeof body.error === 'object' && body.error !== null) {
      code = String(body.error.code ?? code);
      message = String(body.error.message ?? message);
    } else if (body && typeof body.error === 'string') {
      message = body.error;
    }
  } catch {
    // Not JSON (a proxy's error page, say): the status line is all we have.
  }
  return new ApiError(res.status, code, message);
}

/**
 * normalizeAgent maps one entry of GET /api/agents to the fields the page
 * uses. It accepts both a flat shape and the template's own nesting
 * (chatSettings.chatPrompts, model.provider) so the page does not break when
 * the server adds detail.
 */
export function normalizeAgent(raw) {
  const id = String(raw.id ?? raw.agentId ?? '');
  const settings = raw.chatSettings ?? {};
  const model = raw.model && typeof raw.model === 'object' ? raw.model : (raw.modelInfo ?? {});
  const lines = (v) => (Array.isArray(v) ? v.map(String) : v ? [String(v)] : []);
  const provider = String(raw.provider ?? model.provider ?? '');
  return {
    id,
    name: String(raw.name ?? id),
    description: String(raw.description ?? ''),
    tags: lines(raw.tags),
    chatPrompts: lines(raw.chatPrompts ?? settings.chatPrompts),
    initialMessages: lines(raw.initialMessages ?? settings.initialMessages),
    provider,
    // The banner's trigger: the server's flag, or the provider name.
    offline: raw.offline === true || provider === 'offline',
    model: String(typeof raw.model === 'string' ? raw.model : (model.model ?? model.name ?? '')),
  };
}

/** listAgents fetches GET /api/agents. */
export async function listAgents({ fetchImpl = fetch, base = pageBase } = {}) {
  const res = await fetchImpl(`${base}/api/agents`, { headers: withKey({ accept: 'application/json' }) });
  if (!res.ok) throw await errorFrom(res);
  const body = await res.json();
  const list = Array.isArray(body) ? body : (body.agents ?? body.data ?? []);
  return list.map(normalizeAgent).filter((a) => a.id !== '');
}

/**
 * parseSSE yields the events of a text/event-stream body as {id, data}, per
 * the HTML spec's rules: lines end in CR, LF or CRLF, an empty line dispatches,
 * multiple data lines join with LF, and the id persists until a new one comes.
 * Comments and unknown fields are skipped. Breaking out of the loop cancels the
 * body so the connection is released.
 */
export async function* parseSSE(body) {
  // Reading bytes and decoding here (rather than piping through a
  // TextDecoderStream) lets cancel() reach the body itself at once.
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let lastId = null;
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buf += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const lf = buf.indexOf('\n', start);
        const cr = buf.indexOf('\r', start);
        const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
        if (end < 0) break;
        // A CR at the end of the buffer may be the first half of a CRLF,
        // unless the body has ended.
        if (buf[end] === '\r' && end === buf.length - 1 && !done) break;
        const line = buf.slice(start, end);
        start = end + (buf[end] === '\r' && buf[end + 1] === '\n' ? 2 : 1);
        if (line === '') {
          if (data.length > 0) yield { id: lastId, data: data.join('\n') };
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') data.push(value);
        else if (field === 'id' && !value.includes('\0')) lastId = value;
      }
      buf = buf.slice(start);
      if (done) return; // An unterminated last event is dropped, as the spec says.
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * parseEventId splits "<turnId>:<seq>", or "<turnId>:<seq>.<k>" after k
 * takeovers of the turn by another server (restart is k, else 0); seq is -1
 * when the id has another form.
 */
export function parseEventId(id) {
  const at = id?.lastIndexOf(':') ?? -1;
  if (at < 0) return { turn: id ?? '', seq: -1, restart: 0 };
  const [n, k = '0'] = id.slice(at + 1).split('.');
  const seq = Number(n);
  const restart = Number(k);
  if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(restart) || n === '' || k === '') return { turn: id.slice(0, at), seq: -1, restart: 0 };
  return { turn: id.slice(0, at), seq, restart };
}

/** Backoff before reconnect attempt n (0-based): 250 ms doubling to 8 s, with jitter. */
export function backoffDelay(n) {
  const base = Math.min(8000, 250 * 2 ** n);
  return base / 2 + Math.random() * (base / 2);
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });
}

// A 4xx other than timeout and rate limit will not get better by retrying.
const permanent = (status) => status >= 400 && status < 500 && status !== 408 && status !== 429;

/**
 * chatBody is the POST /api/chat body: the new user message as an AI SDK v5
 * UIMessage (what useChat sends), with the plain text beside it for servers
 * that read only that.
 */
export function chatBody(message, sessionId, { trigger, edit } = {}) {
  const id = globalThis.crypto?.randomUUID?.() ?? `m${Date.now()}`;
  return {
    ...(sessionId ? { sessionId } : {}),
    message,
    messages: [{ id, role: 'user', parts: [{ type: 'text', text: message }] }],
    ...(trigger ? { trigger } : {}),
    // The message replaces the session's last user message and its answer.
    ...(edit ? { edit: true } : {}),
  };
}

/**
 * approvalsBody answers the calls of a session that wait for approval:
 * [{id, approved, reason?}], every waiting call at once.
 */
export function approvalsBody(sessionId, approvals) {
  return { sessionId, approvals };
}

/**
 * streamTurn sends one message and feeds every UI message chunk of the reply
 * to onChunk(chunk, frameId). When the stream ends before the closing [DONE]
 * (the connection dropped, or the server shut down and handed the turn to
 * another server behind the same address), it reconnects to
 * GET /api/sessions/:id/stream with Last-Event-ID set to the last frame seen,
 * backing off between attempts, and skips any frame it has already seen so
 * that a chunk is never applied twice. A 204 there means the turn is over and
 * nothing is left to replay.
 *
 * The server runs the turn independently of this request, so aborting signal
 * only stops reading; it does not cancel the turn.
 *
 * Resolves to {sessionId, turnId, lastEventId, ended}; ended is "done" when
 * [DONE] arrived and "gone" on a 204.
 */
export async function streamTurn({ agentId, sessionId, message, trigger, edit, body, onSession = () => {}, fetchImpl = fetch, base = pageBase, signal, ...rest }) {
  const headers = { 'content-type': 'application/json', accept: 'text/event-stream' };
  if (sessionId) headers['x-session-id'] = sessionId;
  let res;
  try {
    res = await fetchImpl(`${base}/api/chat/${encodeURIComponent(agentId)}`, {
      method: 'POST',
      headers: withKey(headers),
      body: JSON.stringify(body ?? chatBody(message, sessionId, { trigger, edit })),
      signal,
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    // The request may or may not have reached the server; without a turn id
    // there is nothing to resume, so say so rather than guess.
    throw new ApiError(0, 'network_error', `Could not reach the server: ${err.message}`);
  }
  if (!res.ok) throw await errorFrom(res);

  const sid = res.headers.get('x-session-id') || sessionId || '';
  const turnId = res.headers.get('x-turn-id') || '';
  if (sid) onSession(sid);
  return follow({ ...rest, sessionId: sid, turnId, body: res.body, fetchImpl, base, signal });
}

/**
 * resumeTurn follows a turn that is already under way (after a page reload,
 * say) from the frame after lastEventId, "<turnId>:0" for the whole turn.
 * Same callbacks and result as streamTurn.
 */
export function resumeTurn({ sessionId, lastEventId, fetchImpl = fetch, base = pageBase, signal, ...rest }) {
  const { turn, seq } = parseEventId(lastEventId);
  return follow({ ...rest, sessionId, turnId: turn, body: null, from: lastEventId, fromSeq: Math.max(0, seq), fetchImpl, base, signal });
}

// follow reads frames from body and, whenever the body fails or ends before
// [DONE], reconnects to the session's stream from the last frame seen.
async function follow({
  sessionId: sid, turnId, body, from = null, fromSeq = 0,
  onChunk, onReconnect = () => {}, fetchImpl, base, signal,
  maxAttempts = 8, delay = backoffDelay,
}) {
  let lastId = from;
  let lastSeq = fromSeq;
  // Frames after a takeover are numbered on from the shared log's last,
  // which may come before the last one the dead server sent: their
  // restart count tells them apart.
  let lastRestart = from ? parseEventId(from).restart : 0;
  let attempt = 0;
  // A resumeTurn starts without a body: its first connect is not a reconnect.
  let first = body === null;
  for (;;) {
    if (body) {
      try {
        for await (const frame of parseSSE(body)) {
          if (frame.id) {
            const { turn, seq, restart } = parseEventId(frame.id);
            // Drop a frame of this turn already applied (a replay that overlaps).
            if (seq >= 0 && (!turnId || turn === turnId)) {
              if (restart < lastRestart || (restart === lastRestart && seq <= lastSeq)) continue;
              lastSeq = seq;
              lastRestart = restart;
            }
            lastId = frame.id;
          }
          attempt = 0;
          if (frame.data === '[DONE]') return { sessionId: sid, turnId, lastEventId: lastId, ended: 'done' };
          let chunk;
          try {
            chunk = JSON.parse(frame.data);
          } catch {
            continue; // A frame that is not JSON is not a chunk; the next one may be.
          }
          onChunk(chunk, frame.id);
        }
        // The body ended without [DONE]: the connection was cut cleanly.
      } catch (err) {
        if (signal?.aborted) throw err;
      }
    }

    if (!sid) throw new ApiError(0, 'connection_lost', 'The connection was lost and the server gave no session to resume.');
    // Before any frame arrived, "<turn>:0" asks for the whole turn.
    const resumeFrom = lastId ?? (turnId ? `${turnId}:0` : null);
    if (!resumeFrom) throw new ApiError(0, 'connection_lost', 'The connection was lost before the turn started.');

    body = null;
    while (!body) {
      if (attempt >= maxAttempts) {
        throw new ApiError(0, 'connection_lost', `The connection was lost and ${maxAttempts} attempts to resume failed.`);
      }
      if (!first) {
        await sleep(delay(attempt), signal);
        onReconnect(attempt + 1);
      }
      first = false;
      attempt++;
      let r;
      try {
        r = await fetchImpl(`${base}/api/sessions/${encodeURIComponent(sid)}/stream`, {
          headers: withKey({ accept: 'text/event-stream', 'last-event-id': resumeFrom }),
          signal,
        });
      } catch (err) {
        if (signal?.aborted) throw err;
        continue;
      }
      if (r.status === 204) return { sessionId: sid, turnId, lastEventId: lastId, ended: 'gone' };
      if (r.ok) {
        body = r.body;
        break;
      }
      const err = await errorFrom(r);
      if (permanent(r.status)) throw err;
    }
  }
}

/**
 * getSession reads GET /api/sessions/:id (history, orchestration snapshot,
 * usage, the latest turn); null when the server no longer knows the session.
 */
export async function getSession(id, { fetchImpl = fetch, base = pageBase } = {}) {
  const res = await fetchImpl(`${base}/api/sessions/${encodeURIComponent(id)}`, { headers: withKey({ accept: 'application/json' }) });
  if (res.status === 404) return null;
  if (!res.ok) throw await errorFrom(res);
  return res.json();
}

/**
 * sendApprovals answers the session's calls that wait for approval and
 * streams the turn that carries the answers out, like streamTurn.
 */
export function sendApprovals({ agentId, sessionId, approvals, ...rest }) {
  return streamTurn({ agentId, sessionId, body: approvalsBody(sessionId, approvals), ...rest });
}

/**
 * stopTurn asks the server to stop the session's running turn, wherever it
 * runs; true when one was running (202), false when none was (204). The
 * turn's stream then ends with an abort chunk, finish and [DONE].
 */
export async function stopTurn(sessionId, { fetchImpl = fetch, base = pageBase } = {}) {
  const res = await fetchImpl(`${base}/api/sessions/${encodeURIComponent(sessionId)}/stop`, { method: 'POST', headers: withKey({ accept: 'application/json' }) });
  if (res.status === 202) {
    await res.text(); // read to the end: the request is then complete, not cancelled
    return true;
  }
  if (res.status === 204) return false;
  throw await errorFrom(res);
}

/**
 * listSessions reads GET /api/sessions: the caller's conversations, newest
 * first, as [{id, agent, title, createdAt, updatedAt}]; null when the
 * server's store does not list them (501).
 */
export async function listSessions({ limit = 50, fetchImpl = fetch, base = pageBase } = {}) {
  const res = await fetchImpl(`${base}/api/sessions?limit=${limit}`, { headers: withKey({ accept: 'application/json' }) });
  if (res.status === 501) return null;
  if (!res.ok) throw await errorFrom(res);
  const body = await res.json();
  return (Array.isArray(body.sessions) ? body.sessions : []).map((c) => ({
    id: String(c.id ?? ''),
    agentId: String(c.agent ?? ''),
    title: String(c.title ?? ''),
    updatedAt: Date.parse(c.updatedAt) || 0,
  })).filter((c) => c.id !== '');
}

/** renameSession sets a session's title with PATCH /api/sessions/:id; '' gives back its first message. */
export async function renameSession(id, title, { fetchImpl = fetch, base = pageBase } = {}) {
  const res = await fetchImpl(`${base}/api/sessions/${encodeURIComponent(id)}`, {
    method: 'PATCH',
    headers: withKey({ 'content-type': 'application/json', accept: 'application/json' }),
    body: JSON.stringify({ title }),
  });
  if (!res.ok) throw await errorFrom(res);
  return res.json();
}

/** deleteSession deletes a session (DELETE /api/sessions/:id); a session already gone is not an error. */
export async function deleteSession(id, { fetchImpl = fetch, base = pageBase } = {}) {
  const res = await fetchImpl(`${base}/api/sessions/${encodeURIComponent(id)}`, { method: 'DELETE', headers: withKey({ accept: 'application/json' }) });
  if (res.status === 204 || res.status === 404) return;
  throw await errorFrom(res);
}
