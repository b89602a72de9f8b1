// The page's model: a turn assembled from UI message chunks, and the small
// per-agent state the page keeps. Pure data, no DOM: the renderer reads it
// and re-draws only the parts whose rev changed, so a long streaming answer
// does not rebuild the whole transcript on every delta.

/** newTurn returns an empty assistant turn. */
export function newTurn() {
  return {
    messageId: '',
    parts: [],
    // Usage of the model calls so far; replaced by the turn total when the
    // final usage event arrives.
    usage: { prompt: 0, completion: 0, total: 0, final: false },
    sessionUsage: null,
    orchestration: null,
    finished: false,
    rev: 0,
  };
}

function touch(turn, part) {
  if (part) part.rev = (part.rev ?? 0) + 1;
  turn.rev++;
}

// findLast returns the last part matching pred; ids repeat across turns in
// principle, and the newest is the one being streamed.
function findLast(turn, pred) {
  for (let i = turn.parts.length - 1; i >= 0; i--) if (pred(turn.parts[i])) return turn.parts[i];
  return undefined;
}

function toolPart(turn, chunk) {
  let part = findLast(turn, (p) => p.kind === 'tool' && p.toolCallId === chunk.toolCallId);
  if (!part) {
    part = { kind: 'tool', toolCallId: String(chunk.toolCallId ?? ''), toolName: String(chunk.toolName ?? 'tool'), state: 'input-streaming', inputText: '', input: undefined, output: undefined, errorText: '' };
    turn.parts.push(part);
  }
  if (chunk.toolName) part.toolName = String(chunk.toolName);
  return part;
}

const num = (v) => (Number.isFinite(Number(v)) ? Number(v) : 0);

/** snapshotOf normalizes an orchestration snapshot (a data-orchestration part's data, or a session's). */
export function snapshotOf(d) {
  d = d && typeof d === 'object' ? d : {};
  return {
    activeStep: String(d.activeStep ?? ''),
    sequenceIndex: num(d.sequenceIndex),
    sequence: Array.isArray(d.sequence) ? d.sequence.map(String) : [],
    offeredTools: Array.isArray(d.offeredTools) ? d.offeredTools.map(String) : [],
    previousStep: String(d.previousStep ?? ''),
    transition: Boolean(d.transition),
  };
}

/** usageOf normalizes a token count. */
export function usageOf(d) {
  return { prompt: num(d?.prompt), completion: num(d?.completion), total: num(d?.total) || num(d?.prompt) + num(d?.completion) };
}

/**
 * applyChunk folds one UI message chunk into turn and reports what changed
 * beyond the parts: {orchestration, usage} flags for the side panel. Unknown
 * chunk types are ignored so a newer server does not break an older page.
 */
export function applyChunk(turn, chunk) {
  const changed = { orchestration: false, usage: false };
  if (!chunk || typeof chunk.type !== 'string') return changed;
  switch (chunk.type) {
    case 'start':
      turn.messageId = String(chunk.messageId ?? '');
      break;
    case 'text-start': {
      const part = { kind: 'text', id: String(chunk.id ?? ''), text: '', done: false };
      turn.parts.push(part);
      touch(turn, part);
      break;
    }
    case 'text-delta': {
      let part = findLast(turn, (p) => p.kind === 'text' && p.id === String(chunk.id ?? ''));
      if (!part) {
        part = { kind: 'text', id: String(chunk.id ?? ''), text: '', done: false };
        turn.parts.push(part);
      }
      part.text += String(chunk.delta ?? '');
      touch(turn, part);
      break;
    }
    case 'text-end': {
      const part = findLast(turn, (p) => p.kind === 'text' && p.id === String(chunk.id ?? ''));
      if (part) {
        part.done = true;
        touch(turn, part);
      }
      break;
    }
    case 'tool-input-start': {
      const part = toolPart(turn, chunk);
      touch(turn, part);
      break;
    }
    case 'tool-input-delta': {
      const part = toolPart(turn, chunk);
      part.inputText += String(chunk.inputTextDelta ?? '');
      touch(turn, part);
      break;
    }
    case 'tool-input-available': {
      const part = toolPart(turn, chunk);
      part.input = chunk.input;
      if (part.state === 'input-streaming') part.state = 'input-available';
      touch(turn, part);
      break;
    }
    case 'tool-input-error':
    case 'tool-output-error': {
      const part = toolPart(turn, chunk);
      if (chunk.input !== undefined) part.input = chunk.input;
      part.state = 'output-error';
      part.errorText = String(chunk.errorText ?? 'The tool failed.');
      touch(turn, part);
      break;
    }
    case 'tool-output-available': {
      const part = toolPart(turn, chunk);
      part.output = chunk.output;
      part.state = 'output-available';
      touch(turn, part);
      break;
    }
    case 'data-orchestration': {
      const snap = snapshotOf(chunk.data);
      turn.orchestration = snap;
      changed.orchestration = true;
      // A step change is also marked in the transcript, where it happened.
      if (snap.transition) {
        const part = { kind: 'step', activeStep: snap.activeStep, previousStep: snap.previousStep };
        turn.parts.push(part);
        touch(turn, part);
      }
      break;
    }
    case 'data-usage': {
      const d = chunk.data ?? {};
      const u = usageOf(d);
      if (d.final) {
        turn.usage = { ...u, final: true };
      } else if (!turn.usage.final) {
        turn.usage = {
          prompt: turn.usage.prompt + u.prompt,
          completion: turn.usage.completion + u.completion,
          total: turn.usage.total + u.total,
          final: false,
        };
      }
      if (d.session) turn.sessionUsage = usageOf(d.session);
      changed.usage = true;
      turn.rev++;
      break;
    }
    case 'data-warning': {
      const part = { kind: 'warning', message: String(chunk.data?.message ?? '') };
      turn.parts.push(part);
      touch(turn, part);
      break;
    }
    case 'error': {
      const part = { kind: 'error', message: String(chunk.errorText ?? 'The turn failed.') };
      turn.parts.push(part);
      touch(turn, part);
      break;
    }
    case 'finish':
    case 'abort':
      turn.finished = true;
      for (const p of turn.parts) if (p.kind === 'text' && !p.done) { p.done = true; touch(turn, p); }
      turn.rev++;
      break;
    default:
      break;
  }
  return changed;
}

/** textOf returns a turn's answer text, all text parts in order. */
export function textOf(turn) {
  return turn.parts.filter((p) => p.kind === 'text').map((p) => p.text).join('\n\n');
}

/**
 * historyEntries turns a session's stored history (chat.Message objects from
 * GET /api/sessions/:id) into what the transcript shows: {user: text} entries
 * and assistant turns, built by feeding the same chunks the live stream would
 * send through applyChunk, so a restored turn looks exactly like a live one.
 * With dropAfterLastUser (a turn still running, to be replayed from its
 * start), the messages after the last user message are left out so they do
 * not show twice.
 */
export function historyEntries(messages, { dropAfterLastUser = false } = {}) {
  let list = Array.isArray(messages) ? messages : [];
  if (dropAfterLastUser) {
    const last = list.findLastIndex((m) => m?.role === 'user');
    if (last >= 0) list = list.slice(0, last + 1);
  }
  const out = [];
  let turn = null;
  let texts = 0;
  const close = () => {
    if (turn) applyChunk(turn, { type: 'finish' });
    turn = null;
  };
  for (const m of list) {
    if (!m || typeof m !== 'object') continue;
    if (m.role === 'user') {
      close();
      out.push({ user: String(m.content ?? '') });
      continue;
    }
    if (m.role !== 'assistant' && m.role !== 'tool') continue; // system prompts are not shown
    if (!turn) {
      turn = newTurn();
      out.push({ turn });
    }
    if (m.role === 'assistant') {
      if (m.content) {
        const id = `h${++texts}`;
        applyChunk(turn, { type: 'text-start', id });
        applyChunk(turn, { type: 'text-delta', id, delta: String(m.content) });
        applyChunk(turn, { type: 'text-end', id });
      }
      for (const c of Array.isArray(m.toolCalls) ? m.toolCalls : []) {
        applyChunk(turn, { type: 'tool-input-available', toolCallId: c.id, toolName: c.name, input: c.arguments });
      }
    } else if (m.isError) {
      applyChunk(turn, { type: 'tool-output-error', toolCallId: m.toolCallId, toolName: m.toolName, errorText: String(m.content ?? '') });
    } else {
      applyChunk(turn, { type: 'tool-output-available', toolCallId: m.toolCallId, toolName: m.toolName, output: { content: String(m.content ?? '') } });
    }
  }
  close();
  return out;
}

const prefix = 'agentdock.session.';

/**
 * Sessions keeps one session ID per agent in sessionStorage: a session is
 * bound to the agent that created it (the server answers 409 otherwise), and
 * sessionStorage keeps it for the tab's life but not across tabs, so two tabs
 * never race on one session.
 */
export class Sessions {
  constructor(storage) {
    this.storage = storage;
    // Fallback when storage is disabled: the session lives as long as the page.
    this.memory = new Map();
  }
  get(agentId) {
    try {
      const id = this.storage?.getItem(prefix + agentId);
      if (id) return id;
    } catch {
      // Storage disabled; fall through to memory.
    }
    return this.memory.get(agentId) ?? '';
  }
  set(agentId, id) {
    if (id) this.memory.set(agentId, id);
    else this.memory.delete(agentId);
    try {
      if (id) this.storage?.setItem(prefix + agentId, id);
      else this.storage?.removeItem(prefix + agentId);
    } catch {
      // Storage full or disabled; the in-memory flow still works.
    }
  }
}
