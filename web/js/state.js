// The page's model: a turn assembled from UI message chunks, and the small
// per-agent state the page keeps. Pure data, no DOM: the renderer reads it
// and re-draws only the parts whose rev changed, so a long streaming answer
// does not rebuild the whole transcript on every delta.

import { guardrailPart } from './guardrail.js';

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

/**
 * usageOf normalizes a token count. prompt counts the cached input too;
 * cacheRead and cacheWrite, the parts of it the provider's prompt cache
 * served and stored, and cost, when the server prices the models, are
 * kept only when the server sent them.
 */
export function usageOf(d) {
  const u = { prompt: num(d?.prompt), completion: num(d?.completion), total: num(d?.total) || num(d?.prompt) + num(d?.completion) };
  return withCache(u, num(d?.cacheRead), num(d?.cacheWrite), num(d?.cost));
}

function withCache(u, read, write, cost) {
  if (read) u.cacheRead = read;
  if (write) u.cacheWrite = write;
  if (cost) u.cost = cost;
  return u;
}

// frameSeq is the <n> of a frame ID "<turnId>:<n>" or "<turnId>:<n>.<k>"
// (0 when there is none): where a part began, which a data-restart names.
function frameSeq(id) {
  const n = Number(String(id ?? '').split(':').pop().split('.')[0]);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/**
 * applyChunk folds one UI message chunk (of the frame frameId, when known)
 * into turn and reports what changed beyond the parts: {orchestration,
 * usage} flags for the side panel. Unknown chunk types are ignored so a
 * newer server does not break an older page.
 */
export function applyChunk(turn, chunk, frameId) {
  const changed = { orchestration: false, usage: false };
  if (!chunk || typeof chunk.type !== 'string') return changed;
  const seq = frameSeq(frameId);
  const parts = turn.parts.length;
  applyPart(turn, chunk, changed);
  // The parts this frame began: a data-restart drops those begun after
  // the frame it names.
  for (let i = parts; i < turn.parts.length; i++) turn.parts[i].seq ??= seq;
  return changed;
}

function applyPart(turn, chunk, changed) {
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
      part.notConfigured = notConfigured(part.errorText);
      touch(turn, part);
      break;
    }
    case 'tool-approval-request': {
      const part = toolPart(turn, chunk);
      part.state = 'approval-requested';
      part.approvalId = String(chunk.approvalId ?? '');
      touch(turn, part);
      break;
    }
    case 'tool-output-denied': {
      const part = toolPart(turn, chunk);
      part.state = 'output-denied';
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
        turn.usage = withCache({
          prompt: turn.usage.prompt + u.prompt,
          completion: turn.usage.completion + u.completion,
          total: turn.usage.total + u.total,
          final: false,
        }, num(turn.usage.cacheRead) + num(u.cacheRead), num(turn.usage.cacheWrite) + num(u.cacheWrite), num(turn.usage.cost) + num(u.cost));
      }
      if (d.session) turn.sessionUsage = usageOf(d.session);
      changed.usage = true;
      turn.rev++;
      break;
    }
    case 'data-guardrail': {
      const part = guardrailPart(chunk.data);
      turn.parts.push(part);
      touch(turn, part);
      break;
    }
    case 'data-agent': {
      // The work of an agent a tool call asked, folded into the call's part.
      const d = chunk.data ?? {};
      const part = toolPart(turn, d);
      foldAgentEvent(part, String(d.agent ?? ''), d.event ?? {});
      touch(turn, part);
      break;
    }
    case 'data-warning': {
      const part = { kind: 'warning', message: String(chunk.data?.message ?? '') };
      turn.parts.push(part);
      touch(turn, part);
      break;
    }
    case 'data-compaction': {
      // Earlier turns were summarized for the model from here on.
      const d = chunk.data ?? {};
      const part = {
        kind: 'compaction', from: num(d.from), through: num(d.through), kept: num(d.kept),
        inputBefore: num(d.inputBefore), inputAfter: num(d.inputAfter), summary: String(d.summary ?? ''), by: String(d.by ?? ''),
      };
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
    case 'abort': {
      const part = { kind: 'stopped', reason: String(chunk.reason ?? '') };
      turn.parts.push(part);
      touch(turn, part);
      turn.finished = true;
      for (const p of turn.parts) if (p.kind === 'text' && !p.done) { p.done = true; touch(turn, p); }
      turn.rev++;
      break;
    }
    case 'data-restart': {
      // Another server took the turn over (its server died, or shut down
      // and handed it over): the text parts and tool calls begun after
      // frame `since`, and those named, are dropped; the step they belong
      // to is shown again.
      const d = chunk.data ?? {};
      const since = num(d.since);
      const texts = new Set((Array.isArray(d.textIds) ? d.textIds : []).map(String));
      const calls = new Set((Array.isArray(d.toolCallIds) ? d.toolCallIds : []).map(String));
      turn.parts = turn.parts.filter((p) => {
        if (p.kind === 'text') return !(p.seq > since || texts.has(p.id));
        if (p.kind === 'tool') return !(p.seq > since || calls.has(p.toolCallId));
        return true;
      });
      turn.restarts = (turn.restarts ?? 0) + 1;
      turn.rev++;
      break;
    }
    case 'finish':
      turn.finishReason = String(chunk.finishReason ?? '');
      turn.finished = true;
      for (const p of turn.parts) if (p.kind === 'text' && !p.done) { p.done = true; touch(turn, p); }
      turn.rev++;
      break;
    default:
      break;
  }
}

/**
 * foldAgentEvent adds one event of an asked agent's turn to the sub-answer
 * of the tool part that asked it: its text, its tool calls and their
 * outcome, the approval it waits for. The events of agents it asked in
 * turn show as their tool calls' progress only.
 */
export function foldAgentEvent(part, agent, ev) {
  const sub = (part.agent ??= { name: agent, text: '', calls: [], asks: null, failed: '', steps: [] });
  switch (ev.type) {
    case 'step-start':
      sub.steps.push(sub.text.length);
      break;
    case 'restart': {
      // Another server took the agent's turn over: the steps from
      // ev.restart.step on are shown again.
      const k = Number(ev.restart?.step ?? 0);
      if (k >= 1 && k <= sub.steps.length) {
        sub.text = sub.text.slice(0, sub.steps[k - 1]);
        sub.steps.length = k - 1;
      }
      break;
    }
    case 'text-delta':
      sub.text += String(ev.text ?? '');
      break;
    case 'tool-call':
      sub.calls.push({ id: String(ev.toolCall?.id ?? ''), name: String(ev.toolCall?.name ?? 'tool'), state: 'running' });
      break;
    case 'tool-result': {
      const c = sub.calls.findLast((x) => x.id === String(ev.toolResult?.callId ?? ''));
      if (c) c.state = ev.toolResult?.isError ? 'failed' : 'done';
      break;
    }
    case 'approval':
      sub.asks = {
        approvalId: String(ev.approval?.id ?? ''),
        agent: String(ev.approval?.agent || agent),
        toolName: String(ev.approval?.call?.name ?? ev.toolCall?.name ?? 'tool'),
        input: ev.approval?.call?.arguments ?? ev.toolCall?.arguments,
      };
      break;
    case 'error':
      sub.failed = String(ev.error?.message ?? 'it failed');
      break;
    default:
      break;
  }
}

/**
 * notConfigured tells a tool error that only says a service is not set up
 * (a web search without a backend) from a failure: the page shows it as a
 * calm notice.
 */
export function notConfigured(text) {
  return /\bnot configured\b/i.test(String(text ?? ''));
}

/** pendingApprovals lists the turn's tool parts that wait for the user's answer. */
export function pendingApprovals(turn) {
  return turn.parts.filter((p) => p.kind === 'tool' && p.state === 'approval-requested');
}

/**
 * answerApproval records the user's decision on a part locally
 * ("approval-responded", as the AI SDK names it) until the server carries
 * it out. It returns the answers to send once no part of the turn waits any
 * more, else null.
 */
export function answerApproval(turn, approvalId, approved, reason = '') {
  const part = turn.parts.find((p) => p.kind === 'tool' && p.approvalId === approvalId && p.state === 'approval-requested');
  if (!part) return null;
  part.state = 'approval-responded';
  part.approved = Boolean(approved);
  part.reason = String(reason ?? '').trim();
  touch(turn, part);
  if (pendingApprovals(turn).length > 0) return null;
  return turn.parts
    .filter((p) => p.kind === 'tool' && p.state === 'approval-responded')
    .map((p) => ({ id: p.approvalId, approved: p.approved, ...(p.reason ? { reason: p.reason } : {}) }));
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
export function historyEntries(messages, { dropAfterLastUser = false, pendingApprovals: waiting = [] } = {}) {
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
    if (m.role === 'summary') {
      // A compaction: shown where it happened, as the live stream shows it.
      if (!turn) {
        turn = newTurn();
        out.push({ turn });
      }
      applyChunk(turn, { type: 'data-compaction', data: { ...(m.summary ?? {}), summary: m.content } });
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
    } else if (m.denied) {
      applyChunk(turn, { type: 'tool-output-denied', toolCallId: m.toolCallId, toolName: m.toolName });
    } else if (m.isError) {
      applyChunk(turn, { type: 'tool-output-error', toolCallId: m.toolCallId, toolName: m.toolName, errorText: String(m.content ?? '') });
    } else {
      applyChunk(turn, { type: 'tool-output-available', toolCallId: m.toolCallId, toolName: m.toolName, output: { content: String(m.content ?? '') } });
    }
  }
  // Calls that still wait for the user's answer show their approval request.
  const last = out.findLast((e) => 'turn' in e)?.turn;
  for (const a of Array.isArray(waiting) ? waiting : []) {
    if (last && last.parts.some((p) => p.kind === 'tool' && p.toolCallId === a?.toolCallId)) {
      if (a.agentCall) {
        // An asked agent's call: the card says which agent asks, for what.
        applyChunk(last, { type: 'data-agent', data: { toolCallId: a.toolCallId, agent: a.agentCall.agent,
          event: { type: 'approval', toolCall: { name: a.agentCall.toolName, arguments: a.agentCall.input }, approval: { id: a.approvalId } } } });
      }
      applyChunk(last, { type: 'tool-approval-request', toolCallId: a.toolCallId, approvalId: a.approvalId });
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

const conversationsKey = 'agentdock.conversations';

/** The most conversations the list keeps; the oldest go first. */
export const maxConversations = 50;

/**
 * Conversations is this browser's list of conversations, in localStorage so
 * that every tab and a reload see it: {id, agentId, title, updatedAt}, newest
 * first. A conversation is reopened from the server (GET
 * /api/sessions/:id), which keeps its history; the list only remembers it.
 */
export class Conversations {
  constructor(storage) {
    this.storage = storage;
    this.memory = [];
  }
  list() {
    try {
      const raw = this.storage?.getItem(conversationsKey);
      if (raw) {
        const v = JSON.parse(raw);
        if (Array.isArray(v)) {
          return v.filter((c) => c && typeof c.id === 'string' && typeof c.agentId === 'string')
            .map((c) => ({ id: c.id, agentId: c.agentId, title: String(c.title ?? ''), updatedAt: Number(c.updatedAt) || 0 }))
            .sort((a, b) => b.updatedAt - a.updatedAt);
        }
      }
    } catch {
      // Unreadable or disabled storage: fall back to this page's memory.
    }
    return [...this.memory];
  }
  get(id) {
    return this.list().find((c) => c.id === id);
  }
  /** touch records activity on a conversation; a title is kept once set. */
  touch({ id, agentId, title = '', now = Date.now() }) {
    if (!id) return;
    const list = this.list();
    const old = list.find((c) => c.id === id);
    const entry = { id, agentId, title: old?.title || String(title).slice(0, 120), updatedAt: now };
    this.save([entry, ...list.filter((c) => c.id !== id)].slice(0, maxConversations));
  }
  remove(id) {
    this.save(this.list().filter((c) => c.id !== id));
  }
  save(list) {
    this.memory = list;
    try {
      this.storage?.setItem(conversationsKey, JSON.stringify(list));
    } catch {
      // Storage full or disabled; the in-memory list still works.
    }
  }
}

const dayMs = 24 * 60 * 60 * 1000;

// startOfDay is the local midnight that begins t's day.
function startOfDay(t) {
  const d = new Date(t);
  d.setHours(0, 0, 0, 0);
  return d.getTime();
}

// daysBefore is the local midnight n calendar days before the day of t
// (a day is not always 24 hours long: daylight saving time).
function daysBefore(t, n) {
  const d = new Date(startOfDay(t));
  d.setDate(d.getDate() - n);
  return d.getTime();
}

/** The groups of the conversation list, newest first. */
export const conversationGroups = ['Today', 'Yesterday', 'Previous 7 days', 'Earlier'];

/**
 * groupConversations sorts conversations ({updatedAt} in ms) into the
 * groups a person scans by, on the local calendar of now: Today,
 * Yesterday, Previous 7 days, Earlier. It returns [{label, items}] without
 * empty groups, each newest first; a conversation dated after now (another
 * machine's clock) counts as today.
 */
export function groupConversations(list, now = Date.now()) {
  const today = startOfDay(now);
  const yesterday = daysBefore(now, 1);
  const week = daysBefore(now, 7);
  const groups = conversationGroups.map((label) => ({ label, items: [] }));
  for (const c of [...list].sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0))) {
    const t = c.updatedAt || 0;
    const i = t >= today ? 0 : t >= yesterday ? 1 : t >= week ? 2 : 3;
    groups[i].items.push(c);
  }
  return groups.filter((g) => g.items.length > 0);
}

/**
 * conversationTime says when a conversation was last active, as its group
 * needs: the time for Today and Yesterday ("2:05 PM"), the weekday and
 * time within the week ("Mon 2:05 PM"), the date before ("Mar 5", with
 * the year when it is not now's). '' for a conversation without a date.
 */
export function conversationTime(t, now = Date.now(), locale = undefined) {
  if (!t) return '';
  const time = new Intl.DateTimeFormat(locale, { hour: 'numeric', minute: '2-digit' }).format(t);
  if (t >= daysBefore(now, 1)) return time;
  if (t >= daysBefore(now, 7)) return `${new Intl.DateTimeFormat(locale, { weekday: 'short' }).format(t)} ${time}`;
  const sameYear = new Date(t).getFullYear() === new Date(now).getFullYear();
  return new Intl.DateTimeFormat(locale, { month: 'short', day: 'numeric', ...(sameYear ? {} : { year: 'numeric' }) }).format(t);
}

/**
 * searchSource reads where a search result comes from off its heading
 * ("## Search results from Wikipedia: …") and how many results it lists:
 * {source, count}, or null for a result of another shape.
 */
export function searchSource(content) {
  const m = /^#{1,6}\s*Search results(?: from ([^:\n]+))?:/.exec(String(content ?? ''));
  if (!m) return null;
  const count = (String(content).match(/^\d+\.\s+\[/gm) ?? []).length;
  return { source: m[1]?.trim() ?? '', count };
}
