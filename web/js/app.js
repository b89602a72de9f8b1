// Wires the page together: the agent picker, the composer, and one turn at a
// time per agent streamed into the transcript and the side panel. Each agent
// keeps its own transcript, session, orchestration and usage, so switching
// agents and back loses nothing, and a turn still streaming keeps updating
// its agent's (possibly hidden) transcript.

import {
  ApiError, deleteSession, getSession, listAgents, listSessions, renameSession, resumeTurn, sendApprovals, setApiKey, stopTurn, streamTurn,
} from './api.js';
import {
  Conversations, Sessions, answerApproval, applyChunk, conversationTime, groupConversations, historyEntries, newTurn, pendingApprovals, snapshotOf, textOf, usageOf,
} from './state.js';
import {
  TurnView, errorMessage, h, noteMessage, renderAgents, renderOrchestration,
  renderSuggestions, renderUsage, setEditable, userMessage,
} from './render.js';

const $ = (id) => document.getElementById(id);
const ui = {
  agentList: $('agent-list'),
  agentsPanel: $('agents-panel'),
  agentsToggle: $('agents-toggle'),
  scrim: $('scrim'),
  title: $('agent-title'),
  badge: $('agent-badge'),
  aboutToggle: $('about-toggle'),
  desc: $('agent-desc'),
  newChat: $('new-chat'),
  newChatTop: $('new-chat-top'),
  topbarAgent: $('topbar-agent'),
  topbarStatus: $('topbar-status'),
  statusToggle: $('status-toggle'),
  statusPanel: $('status-panel'),
  banner: $('offline-banner'),
  dismissOffline: $('dismiss-offline'),
  log: $('log'),
  dock: $('dock'),
  suggestions: $('suggestions'),
  form: $('composer'),
  input: $('composer-input'),
  send: $('send'),
  sendLabel: $('send-label'),
  stop: $('stop'),
  editing: $('editing'),
  cancelEdit: $('cancel-edit'),
  conversationList: $('conversation-list'),
  orchestration: $('orchestration'),
  usage: $('usage'),
  sessionId: $('session-id'),
  statusDetails: $('status-details'),
  statusSummary: $('status-summary'),
  announcer: $('announcer'),
  signIn: $('sign-in'),
  keyForm: $('key-form'),
  keyInput: $('key-input'),
  keyRemember: $('key-remember'),
  keyError: $('key-error'),
  signOut: $('sign-out'),
};

// The API key, sent as x-api-key, when the server asks for one (it answers
// 401 and the sign-in view shows). "Remember on this device" keeps it in
// localStorage; otherwise it lives in sessionStorage and is handed to the
// other tabs of the page that ask for it while one is open
// (BroadcastChannel), so that a second tab does not ask again.
const apiKeyKey = 'agentdock.apiKey';
const keyChannel = typeof BroadcastChannel === 'function' ? new BroadcastChannel('agentdock.apiKey') : null;
function storedKey() {
  try {
    return localStorage.getItem(apiKeyKey) || sessionStorage.getItem(apiKeyKey) || '';
  } catch {
    return '';
  }
}
function storeKey(key, remember) {
  try {
    if (remember) localStorage.setItem(apiKeyKey, key);
    else localStorage.removeItem(apiKeyKey);
    sessionStorage.setItem(apiKeyKey, key);
  } catch {
    // Storage disabled: the key lasts until the page is reloaded.
  }
}
function forgetKey() {
  try {
    localStorage.removeItem(apiKeyKey);
    sessionStorage.removeItem(apiKeyKey);
  } catch {
    // Nothing stored.
  }
}
// askOpenTabs asks the page's other open tabs for their key: '' when none
// answers within a moment.
function askOpenTabs() {
  if (!keyChannel) return Promise.resolve('');
  return new Promise((resolve) => {
    const done = (key) => {
      keyChannel.removeEventListener('message', onMessage);
      clearTimeout(timer);
      resolve(key);
    };
    const onMessage = (e) => { if (e.data?.type === 'key' && typeof e.data.key === 'string') done(e.data.key); };
    const timer = setTimeout(() => done(''), 300);
    keyChannel.addEventListener('message', onMessage);
    keyChannel.postMessage({ type: 'ask' });
  });
}
keyChannel?.addEventListener('message', (e) => {
  if (e.data?.type === 'ask') {
    const key = storedKey();
    if (key && document.body.dataset.ready === 'true') keyChannel.postMessage({ type: 'key', key });
  } else if (e.data?.type === 'signed-out') {
    forgetKey();
    location.reload();
  }
});
setApiKey(storedKey());

const sessions = new Sessions(globalThis.sessionStorage);
// This browser's conversations, for every tab: the list when the server
// cannot list its sessions (serverList null); reopened from the server.
const conversations = new Conversations(globalThis.localStorage);
// The caller's conversations as the server lists them (GET /api/sessions),
// the same in every browser with the same key; null until read, or when the
// server does not list sessions.
let serverList = null;
// The turn model behind each assistant article, for Copy.
const turnOf = new WeakMap();
const agentKey = 'agentdock.agent';
let agents = [];
let current = null; // the selected agent's state

// agentState holds what the page shows for one agent while another is selected.
const states = new Map();
function stateOf(agent) {
  let s = states.get(agent.id);
  if (!s) {
    s = { agent, transcript: document.createDocumentFragment(), orchestration: null, turnUsage: null, sessionUsage: null, busy: false, greeted: false, lastTurn: null, lastUser: '', lastUserEl: null, editing: false, queue: [] };
    states.set(agent.id, s);
  }
  return s;
}

function announce(text) {
  // Clearing first makes a repeated message count as a change.
  ui.announcer.textContent = '';
  requestAnimationFrame(() => { ui.announcer.textContent = text; });
}

// Keep the newest content in view, unless the reader scrolled up to read.
// Wide layouts scroll the log itself; the phone layout scrolls the page.
function scroller() {
  return getComputedStyle(ui.log).overflowY === 'visible' ? document.scrollingElement : ui.log;
}
function nearBottom() {
  const el = scroller();
  return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
}
function scrollToEnd() {
  const el = scroller();
  el.scrollTop = el.scrollHeight;
}

function appendTo(s, node) {
  if (s === current) {
    const stick = nearBottom();
    ui.log.append(node);
    if (stick) scrollToEnd();
  } else {
    s.transcript.append(node);
  }
}

// The one-line summary is what a phone shows while the panel is folded.
function renderSummary() {
  const o = current?.orchestration;
  const parts = [o ? (o.activeStep || 'no step') : 'not started'];
  if (o?.sequence.length) parts.push(`${Math.min(o.sequenceIndex, o.sequence.length)}/${o.sequence.length}`);
  if (current?.sessionUsage) parts.push(`${current.sessionUsage.total.toLocaleString('en-US')} tokens`);
  ui.statusSummary.textContent = parts.join(' · ');
  ui.topbarStatus.textContent = current?.orchestration || current?.sessionUsage ? parts.join(' · ') : '';
}

function renderPanels() {
  renderOrchestration(ui.orchestration, current?.orchestration ?? null);
  renderUsage(ui.usage, current?.turnUsage ?? null, current?.sessionUsage ?? null);
  renderSummary();
  const sid = current ? sessions.get(current.agent.id) : '';
  ui.sessionId.textContent = sid ? `Session ${sid.slice(0, 8)}…` : 'No session yet';
  ui.sessionId.title = sid;
}

function updateComposer() {
  const busy = Boolean(current?.busy);
  // The composer stays usable while an answer streams: a message sent then
  // waits for it (Queue), and is sent as the answer ends.
  ui.send.disabled = !current;
  ui.sendLabel.textContent = busy ? 'Queue' : current?.editing ? 'Resend' : 'Send';
  ui.send.title = ui.sendLabel.textContent;
  // While an answer streams, Stop goes beside Send; it needs the session,
  // which the server names as the answer starts.
  ui.stop.hidden = !busy;
  ui.stop.disabled = !busy || !sessions.get(current.agent.id);
  ui.editing.hidden = !current?.editing;
  fitInput();
  // Only the last message can be edited, and not while it is answered.
  if (current) setEditable(current.lastUserEl, !busy && !current.editing && Boolean(current.lastUser));
  updateSuggestions();
}

// The agent's suggested prompts start a conversation: they show until its
// first message.
function updateSuggestions() {
  const prompts = current?.agent.chatPrompts ?? [];
  ui.suggestions.hidden = prompts.length === 0 || Boolean(current?.lastUser) || Boolean(current?.busy);
}

// conversationList is what the list shows: the server's list of the
// caller's conversations, or this browser's when the server keeps none.
function conversationList() {
  return serverList ?? conversations.list();
}

// renderConversations lists the conversations by day (Today, Yesterday,
// the week, earlier), each with its agent and when it was last active,
// the open one marked; each has one menu of actions (Rename, Delete),
// where the server keeps the list. One being renamed shows its title in a
// field; a delete asks again in its menu.
function renderConversations() {
  const open = current ? sessions.get(current.agent.id) : '';
  const names = new Map(agents.map((a) => [a.id, a.name]));
  const list = conversationList().filter((c) => names.has(c.agentId));
  if (list.length === 0) {
    ui.conversationList.replaceChildren(h('p', { class: 'conversation-empty', text: 'Your conversations will be listed here.' }));
    return;
  }
  const now = Date.now();
  ui.conversationList.replaceChildren(...groupConversations(list, now).map((g) => {
    const labelId = `conversations-${g.label.toLowerCase().replace(/\W+/g, '-')}`;
    return h('section', { class: 'conversation-group', role: 'listitem', 'aria-labelledby': labelId },
      h('h3', { class: 'conversation-group-label', id: labelId, text: g.label }),
      h('ul', { class: 'conversation-items', 'aria-labelledby': labelId }, ...g.items.map((c) => conversationItem(c, names, open, now))));
  }));
}

function conversationItem(c, names, open, now) {
  const title = c.title || 'Untitled conversation';
  if (renaming === c.id) {
    return h('li', { class: 'conversation-item' },
      h('form', { class: 'rename-form', 'data-rename': c.id },
        h('label', { class: 'sr-only', for: `rename-${c.id}`, text: 'New name' }),
        h('input', { id: `rename-${c.id}`, class: 'rename-input', type: 'text', value: c.title, maxlength: '200', autocomplete: 'off' }),
        h('button', { type: 'submit', class: 'small', text: 'Save' }),
        h('button', { type: 'button', class: 'quiet small', 'data-conversation-action': 'cancel-rename', text: 'Cancel' })));
  }
  const when = conversationTime(c.updatedAt, now);
  const meta = [names.get(c.agentId), when].filter(Boolean).join(' · ');
  const menuOpen = menuFor === c.id;
  const menuId = `menu-${c.id}`;
  return h('li', { class: `conversation-item${c.id === open ? ' current' : ''}`, 'data-item': c.id },
    h('button', { type: 'button', class: 'conversation', 'data-conversation': c.id, 'aria-current': c.id === open ? 'true' : undefined, title },
      h('span', { class: 'conversation-title', text: title }),
      h('span', { class: 'conversation-meta', text: meta })),
    serverList ? h('button', {
      type: 'button', class: 'icon small conversation-more', 'data-menu': c.id, 'aria-label': `Actions for ${title}`,
      'aria-haspopup': 'menu', 'aria-expanded': menuOpen ? 'true' : 'false', 'aria-controls': menuOpen ? menuId : undefined,
    }, icon('M5 12h.01M12 12h.01M19 12h.01', 'dots')) : null,
    menuOpen ? h('div', { class: 'conversation-menu', role: 'menu', id: menuId, 'aria-label': `Actions for ${title}` },
      ...(confirming === c.id
        ? [h('p', { class: 'menu-note', text: 'Delete this conversation for good?' }),
          h('button', { type: 'button', role: 'menuitem', class: 'danger', 'data-conversation-action': 'delete', 'data-id': c.id, text: 'Delete' }),
          h('button', { type: 'button', role: 'menuitem', 'data-conversation-action': 'close-menu', text: 'Keep it' })]
        : [h('button', { type: 'button', role: 'menuitem', 'data-conversation-action': 'rename', 'data-id': c.id, text: 'Rename' }),
          h('button', { type: 'button', role: 'menuitem', class: 'danger', 'data-conversation-action': 'confirm-delete', 'data-id': c.id, text: 'Delete…' })])) : null);
}

// icon is an SVG glyph of one path, drawn with the text's colour.
function icon(d, cls = '') {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  if (cls) svg.setAttribute('class', cls);
  const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  path.setAttribute('d', d);
  svg.append(path);
  return svg;
}

// renaming, menuFor and confirming name the conversation whose rename
// field, whose menu, and whose delete confirmation show.
let renaming = '';
let menuFor = '';
let confirming = '';

// closeMenu closes the open conversation menu, giving the focus back to
// its button when asked.
function closeMenu(focus = false) {
  const id = menuFor;
  if (!id) return;
  menuFor = '';
  confirming = '';
  renderConversations();
  if (focus) ui.conversationList.querySelector(`button[data-menu="${CSS.escape(id)}"]`)?.focus();
}

// refreshConversations reads the server's list again (another browser
// may have added to it); a server that keeps no list leaves this
// browser's.
async function refreshConversations() {
  try {
    serverList = await listSessions();
  } catch {
    // Keep what is shown; the next refresh tries again.
  }
  renderConversations();
}

// remember records activity on the agent's open conversation.
function remember(s, title = '') {
  const id = sessions.get(s.agent.id);
  if (!id) return;
  conversations.touch({ id, agentId: s.agent.id, title });
  if (serverList && !serverList.some((c) => c.id === id)) {
    serverList = [{ id, agentId: s.agent.id, title: title || s.lastUser, updatedAt: Date.now() }, ...serverList];
  }
  renderConversations();
}

// showActions puts Copy on every finished answer and Regenerate on the last one.
// A reader who follows the conversation keeps the new row in view.
function showActions(s) {
  const last = s.lastTurn;
  if (!last) return;
  const stick = s === current && nearBottom();
  const waiting = pendingApprovals(last.turn).length > 0 || last.turn.parts.some((p) => p.state === 'approval-responded');
  last.view.setActions({ visible: last.turn.parts.length > 0, regenerate: !waiting && Boolean(s.lastUser) });
  if (stick) scrollToEnd();
}

function selectAgent(id, { focus = true } = {}) {
  const agent = agents.find((a) => a.id === id) ?? agents[0];
  if (!agent) return;
  if (current) current.transcript.append(...ui.log.childNodes);
  current = stateOf(agent);
  ui.log.append(current.transcript);
  if (!current.greeted) {
    current.greeted = true;
    if (agent.initialMessages.length) ui.log.append(noteMessage(agent.initialMessages.join('\n\n'), 'assistant greeting'));
    const sid = sessions.get(agent.id);
    if (sid) restore(current, sid);
  }
  scrollToEnd();
  try {
    sessionStorage.setItem(agentKey, agent.id);
  } catch {
    // Not remembering the choice is fine.
  }
  renderAgents(ui.agentList, agents, agent.id);
  ui.title.textContent = agent.name;
  ui.topbarAgent.textContent = agent.name;
  document.title = `${agent.name} · AgentDock`;
  ui.badge.hidden = !agent.offline;
  // The description folds behind About: the conversation comes first.
  ui.desc.textContent = agent.description;
  ui.aboutToggle.hidden = agent.description === '';
  ui.aboutToggle.setAttribute('aria-label', `About ${agent.name}`);
  setAbout(false);
  ui.banner.hidden = !agent.offline || offlineNoticeDismissed();
  renderSuggestions(ui.suggestions, agent.chatPrompts);
  ui.input.value = current.editing ? current.lastUser : ui.input.value;
  renderPanels();
  updateComposer();
  if (!current.busy) drainQueue(current);
  renderConversations();
  setAgentsOpen(false);
  if (focus) ui.input.focus();
}

function setAgentsOpen(open) {
  ui.agentsToggle.setAttribute('aria-expanded', String(open));
  ui.agentsPanel.classList.toggle('open', open);
  ui.scrim.hidden = !open;
}

function setAbout(open) {
  ui.aboutToggle.setAttribute('aria-expanded', String(open));
  ui.aboutToggle.textContent = open ? 'Hide' : 'About';
  ui.desc.hidden = !open;
}

// The offline notice is one line, and once dismissed stays dismissed in
// this browser: the badge beside the agent's name still says it.
const offlineNoticeKey = 'agentdock.offlineNotice';
function offlineNoticeDismissed() {
  try {
    return localStorage.getItem(offlineNoticeKey) === 'dismissed';
  } catch {
    return false;
  }
}

// setStatusOpen shows or hides the orchestration panel on a phone, where
// it drops down from the top bar.
function setStatusOpen(open) {
  ui.statusToggle.setAttribute('aria-expanded', String(open));
  ui.statusPanel.classList.toggle('open', open);
  if (open) ui.statusDetails.open = true;
}

function explain(err) {
  if (!(err instanceof ApiError)) return `Something went wrong: ${err?.message ?? err}`;
  switch (err.code) {
    case 'session_busy':
      return 'The agent is still answering your previous message. Wait for it to finish, then send again.';
    case 'store_unavailable':
      return 'The session store is unavailable right now. Try again in a moment.';
    default:
      return err.message || err.code;
  }
}

// send sends a message (or, with trigger regenerate-message, asks for the
// last one's answer again). A message the server refuses before any answer
// (too long, say) goes back to the composer, beside the error, and leaves
// the conversation as it was.
async function send(text, { trigger, bubble: queued } = {}) {
  const s = current;
  text = text.trim();
  if (!s || text === '') return;
  if (s.busy) {
    if (trigger) return;
    // Sent while an answer streams: shown at once, marked as waiting, and
    // sent when the answers before it ended (the server would queue it
    // too; the page keeps one stream at a time).
    const bubble = userMessage(text);
    bubble.classList.add('queued');
    bubble.setAttribute('aria-label', 'Waiting to be sent');
    appendTo(s, bubble);
    s.queue.push({ text, bubble });
    announce('Message queued; it is sent when the answer ends');
    return;
  }
  const agentId = s.agent.id;
  const edit = s.editing && Boolean(s.lastUser);
  const was = { lastUser: s.lastUser, lastUserEl: s.lastUserEl };
  s.busy = true;
  s.editing = false;
  updateComposer();
  // A new message the server takes denies the calls that wait for
  // approval (the server says so to the model); the page marks them once
  // the server took it, and not when it refuses the message (too long,
  // say), since they still wait then.
  const waitingTurn = s.lastTurn;
  const waiting = waitingTurn && !edit ? pendingApprovals(waitingTurn.turn) : [];
  const accepted = () => {
    for (const p of waiting) {
      if (p.state !== 'approval-requested') continue;
      applyChunk(waitingTurn.turn, { type: 'tool-output-denied', toolCallId: p.toolCallId });
      p.note = 'You sent a new message instead, so this call did not run.';
    }
    if (waiting.length > 0) waitingTurn.view.sync(waitingTurn.turn);
  };
  let replaced = [];
  if (edit) {
    // The edited message and its answer are replaced: they go once the
    // server took the new text, and come back if it refuses it.
    replaced = [was.lastUserEl, s.lastTurn?.view.el].filter(Boolean);
    for (const el of replaced) el.hidden = true;
  } else if (s.lastTurn) {
    s.lastTurn.view.setActions({ visible: true, regenerate: false });
  }
  let bubble = null;
  if (queued) {
    bubble = queued;
    bubble.classList.remove('queued');
    bubble.removeAttribute('aria-label');
    setEditable(s.lastUserEl, false);
    s.lastUserEl = bubble;
  } else if (trigger !== 'regenerate-message') {
    bubble = userMessage(text);
    appendTo(s, bubble);
    setEditable(s.lastUserEl, false);
    s.lastUserEl = bubble;
  }
  s.lastUser = text;
  const lastTurn = s.lastTurn;
  const refused = await play(s, (callbacks) => streamTurn({
    agentId, sessionId: sessions.get(agentId), message: text, trigger, edit, ...callbacks,
    onSession(id) {
      accepted();
      callbacks.onSession(id);
    },
  }));
  if (refused && bubble) {
    bubble.remove();
    for (const el of replaced) el.hidden = false;
    Object.assign(s, was, { lastTurn });
    if (lastTurn && !edit) showActions(s);
    if (s === current && ui.input.value.trim() === '') {
      ui.input.value = text;
      s.editing = edit;
    }
    if (s === current) updateComposer();
    drainQueue(s);
    return;
  }
  for (const el of replaced) el.remove();
  drainQueue(s);
}

// drainQueue sends the next message that waited for the answer that just
// ended.
function drainQueue(s) {
  const next = s.queue.shift();
  if (!next) return;
  if (s !== current) {
    // Its conversation is not shown: it waits until it is.
    s.queue.unshift(next);
    return;
  }
  send(next.text, { bubble: next.bubble });
}

// startEdit puts the last user message in the composer: sending it replaces
// that message and its answer (the server rolls the orchestration back as
// for a regenerate).
function startEdit(s) {
  if (!s || s.busy || !s.lastUser) return;
  s.editing = true;
  ui.input.value = s.lastUser;
  updateComposer();
  ui.input.focus();
  ui.input.setSelectionRange(ui.input.value.length, ui.input.value.length);
}

function cancelEdit(s) {
  if (!s?.editing) return;
  s.editing = false;
  ui.input.value = '';
  updateComposer();
  ui.input.focus();
}

// stop asks the server to stop the selected agent's running turn; its
// stream then ends by itself (abort, finish, [DONE]).
async function stop() {
  const s = current;
  const sid = s ? sessions.get(s.agent.id) : '';
  if (!s?.busy || !sid || s.stopping) return;
  s.stopping = true;
  ui.stop.disabled = true;
  try {
    await stopTurn(sid);
    announce('Stopping');
  } catch (err) {
    appendTo(s, errorMessage(`Could not stop the answer: ${explain(err)}`));
  } finally {
    s.stopping = false;
  }
}

// regenerate replaces the last answer with a new one to the same message.
async function regenerate(s) {
  if (!s || s.busy || !s.lastTurn || !s.lastUser) return;
  s.lastTurn.view.el.remove();
  s.lastTurn = null;
  await send(s.lastUser, { trigger: 'regenerate-message' });
}

// answer records the user's decision on a call that waits for approval;
// once every waiting call of the answer is decided, they go to the server,
// and the same answer goes on.
async function answer(s, approvalId, approved, reason) {
  const last = s?.lastTurn;
  if (!last || s.busy) return;
  const approvals = answerApproval(last.turn, approvalId, approved, reason);
  last.view.sync(last.turn);
  if (!approvals) return;
  const agentId = s.agent.id;
  const sessionId = sessions.get(agentId);
  s.busy = true;
  updateComposer();
  last.view.setActions({ visible: false, regenerate: false });
  await play(s, (callbacks) => sendApprovals({ agentId, sessionId, approvals, ...callbacks }), last);
  // Refused (another tab answered first, say): show what the server has.
  if (last.turn.parts.some((p) => p.state === 'approval-responded') && sessions.get(agentId) === sessionId && !s.busy) {
    reset(s);
    if (s === current) selectAgent(agentId, { focus: false });
  }
}

// play shows one assistant turn as start(callbacks) streams it, and keeps the
// side panel in step. s.busy must be set by the caller and is cleared here.
// A turn that answers approvals goes on in the answer it continues (into).
// It resolves to the error that kept the turn from starting, if the server
// refused it before any answer (null otherwise).
async function play(s, start, into) {
  let refused = null;
  const agentId = s.agent.id;
  const turn = into?.turn ?? newTurn();
  const view = into?.view ?? new TurnView();
  turn.finished = false;
  view.el.setAttribute('aria-busy', 'true');
  view.setStatus('Thinking…');
  turnOf.set(view.el, turn);
  if (!into) appendTo(s, view.el);
  let frame = 0;
  let toolsSeen = 0;
  // Deltas arrive faster than the screen refreshes: draw once per frame.
  const draw = () => {
    frame = 0;
    const stick = s === current && nearBottom();
    view.sync(turn);
    if (stick) scrollToEnd();
  };
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };

  try {
    await start({
      onSession(id) {
        sessions.set(agentId, id);
        remember(s, s.lastUser);
        if (s === current) {
          renderPanels();
          updateComposer();
        }
      },
      onReconnect(attempt) {
        view.setStatus(`Connection lost; reconnecting (attempt ${attempt})…`);
      },
      onChunk(chunk, id) {
        const changed = applyChunk(turn, chunk, id);
        if (changed.orchestration) {
          const prev = s.orchestration;
          s.orchestration = turn.orchestration;
          if (s === current) {
            renderOrchestration(ui.orchestration, s.orchestration);
            renderSummary();
          }
          if (turn.orchestration.activeStep !== (prev?.activeStep ?? '') && s === current) {
            announce(`Step: ${turn.orchestration.activeStep || 'none'}`);
          }
        }
        if (changed.usage) {
          s.turnUsage = turn.usage;
          if (turn.sessionUsage) s.sessionUsage = turn.sessionUsage;
          if (s === current) {
            renderUsage(ui.usage, s.turnUsage, s.sessionUsage);
            renderSummary();
          }
        }
        // The status line says what the agent is doing between visible output.
        const last = turn.parts.at(-1);
        if (last?.kind === 'tool' && (last.state === 'input-streaming' || last.state === 'input-available')) {
          view.setStatus(`Using ${last.toolName}…`);
        } else {
          view.setStatus(last?.kind === 'text' && !last.done ? '' : 'Thinking…');
        }
        const tools = turn.parts.filter((p) => p.kind === 'tool');
        if (tools.length > toolsSeen) {
          toolsSeen = tools.length;
          if (s === current) announce(`Using tool ${tools.at(-1).toolName}`);
        }
        schedule();
      },
    });
  } catch (err) {
    // A session the server no longer knows (expired, or another key's) or that
    // belongs to another agent cannot be continued: start afresh next time.
    if (err instanceof ApiError && (err.status === 404 || err.code === 'session_agent_mismatch') && sessions.get(agentId)) {
      sessions.set(agentId, '');
      appendTo(s, errorMessage(`${explain(err)} The conversation was reset; send your message again to start a new one.`));
    } else {
      appendTo(s, errorMessage(explain(err)));
    }
    if (turn.parts.length === 0 && !into) refused = err;
  } finally {
    if (frame) cancelAnimationFrame(frame);
    turn.finished = true;
    draw();
    // Whoever followed the answer sees its end, the rows that appear with
    // it (its actions, the Edit of the message) included.
    const stick = s === current && nearBottom();
    view.done();
    if (turn.parts.length === 0) view.el.remove();
    else s.lastTurn = { turn, view };
    const waiting = pendingApprovals(turn).length > 0;
    if (waiting) view.setStatus('Waiting for your approval.');
    showActions(s);
    s.busy = false;
    remember(s);
    if (s === current) {
      updateComposer();
      renderPanels();
      if (stick) scrollToEnd();
      announce(waiting ? 'The agent asks for your approval' : 'Answer complete');
    }
  }
  refreshConversations();
  return refused;
}

// restore shows the history of the session this tab already has with the
// agent (after a reload), and follows its turn if one is still running.
async function restore(s, sid) {
  s.busy = true;
  updateComposer();
  let view;
  try {
    view = await getSession(sid);
  } catch (err) {
    appendTo(s, errorMessage(`Could not load your earlier conversation: ${explain(err)}`));
  }
  if (view === null || (view && view.agent && view.agent !== s.agent.id)) {
    conversations.remove(sid);
    sessions.set(s.agent.id, '');
    appendTo(s, noteMessage('Your earlier conversation has expired; your next message starts a new one.'));
  }
  const running = Boolean(view?.turn?.running);
  if (view) {
    let title = '';
    for (const e of historyEntries(view.messages, { dropAfterLastUser: running, pendingApprovals: view.pendingApprovals })) {
      if ('user' in e) {
        const bubble = userMessage(e.user);
        appendTo(s, bubble);
        title ||= e.user;
        s.lastUser = e.user;
        s.lastUserEl = bubble;
        s.lastTurn = null;
      } else {
        const tv = new TurnView();
        tv.sync(e.turn);
        tv.done();
        turnOf.set(tv.el, e.turn);
        appendTo(s, tv.el);
        if (s.lastTurn) s.lastTurn.view.setActions({ visible: true, regenerate: false });
        s.lastTurn = { turn: e.turn, view: tv };
        tv.setActions({ visible: true, regenerate: false });
        if (pendingApprovals(e.turn).length > 0) tv.setStatus('Waiting for your approval.');
      }
    }
    if (!running) showActions(s);
    remember(s, title);
    if (view.orchestration) s.orchestration = snapshotOf(view.orchestration);
    if (view.usage) s.sessionUsage = usageOf(view.usage);
  }
  if (s === current) renderPanels();
  if (running) {
    await play(s, (callbacks) => resumeTurn({ sessionId: sid, lastEventId: `${view.turn.id}:0`, ...callbacks }));
    return;
  }
  s.busy = false;
  if (s === current) updateComposer();
}

// reset forgets what the page shows of an agent's conversation.
function reset(s) {
  if (s === current) ui.log.replaceChildren();
  else s.transcript = document.createDocumentFragment();
  Object.assign(s, { greeted: false, orchestration: null, turnUsage: null, sessionUsage: null, lastTurn: null, lastUser: '', lastUserEl: null, editing: false });
}

function newConversation() {
  if (!current || current.busy) return;
  if (current.editing) ui.input.value = '';
  sessions.set(current.agent.id, '');
  reset(current);
  selectAgent(current.agent.id);
}

// openConversation reopens one of this browser's conversations: its agent
// is selected and its history read from the server.
function openConversation(id) {
  const c = conversationList().find((x) => x.id === id);
  const agent = agents.find((a) => a.id === c?.agentId);
  if (!agent) return;
  const s = stateOf(agent);
  if (s.busy) {
    selectAgent(agent.id);
    return;
  }
  if (sessions.get(agent.id) !== id || !s.greeted) {
    sessions.set(agent.id, id);
    reset(s);
  }
  selectAgent(agent.id);
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    const was = button.textContent;
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = was; }, 1500);
    announce('Copied');
  } catch {
    announce('Copying is not allowed here');
  }
}

// Event wiring: all listeners here, none inline, so the CSP needs no 'unsafe-inline'.
ui.agentList.addEventListener('click', (e) => {
  const btn = e.target.closest('button[data-agent]');
  if (btn) selectAgent(btn.dataset.agent);
});
ui.suggestions.addEventListener('click', (e) => {
  const btn = e.target.closest('button[data-prompt]');
  if (btn) send(btn.dataset.prompt);
});
ui.form.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = ui.input.value;
  if (!current || text.trim() === '' || (current.busy && current.editing)) return;
  ui.input.value = '';
  send(text);
});
ui.input.addEventListener('keydown', (e) => {
  // Enter sends; Shift+Enter is a new line; Enter that ends an IME composition is not a send.
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    ui.form.requestSubmit();
  }
});
ui.newChat.addEventListener('click', newConversation);
ui.cancelEdit.addEventListener('click', () => cancelEdit(current));
ui.stop.addEventListener('click', stop);
ui.conversationList.addEventListener('click', (e) => {
  const open = e.target.closest('button[data-conversation]');
  if (open) {
    menuFor = '';
    openConversation(open.dataset.conversation);
    return;
  }
  const more = e.target.closest('button[data-menu]');
  if (more) {
    const id = more.dataset.menu;
    if (menuFor === id) {
      closeMenu(true);
      return;
    }
    menuFor = id;
    confirming = '';
    renderConversations();
    ui.conversationList.querySelector('.conversation-menu [role="menuitem"]')?.focus();
    return;
  }
  const btn = e.target.closest('button[data-conversation-action]');
  if (!btn) return;
  const id = btn.dataset.id;
  switch (btn.dataset.conversationAction) {
    case 'rename':
      renaming = id;
      menuFor = '';
      confirming = '';
      renderConversations();
      ui.conversationList.querySelector('.rename-input')?.select();
      break;
    case 'cancel-rename':
      renaming = '';
      renderConversations();
      break;
    case 'confirm-delete':
      confirming = id;
      renderConversations();
      ui.conversationList.querySelector('.conversation-menu button[data-conversation-action="delete"]')?.focus();
      break;
    case 'delete':
      menuFor = '';
      confirming = '';
      removeConversation(id);
      break;
    case 'close-menu':
      closeMenu(true);
      break;
    default:
  }
});
ui.conversationList.addEventListener('submit', async (e) => {
  const form = e.target.closest('form[data-rename]');
  if (!form) return;
  e.preventDefault();
  const id = form.dataset.rename;
  const title = form.querySelector('.rename-input').value;
  try {
    const renamed = await renameSession(id, title);
    serverList = (serverList ?? []).map((c) => (c.id === id ? { ...c, title: renamed.title } : c));
    renaming = '';
    announce('Conversation renamed');
  } catch (err) {
    announce(`Could not rename the conversation: ${explain(err)}`);
  }
  renderConversations();
});
ui.conversationList.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && e.target.classList?.contains('rename-input')) {
    e.stopPropagation();
    renaming = '';
    renderConversations();
    return;
  }
  const menu = e.target.closest?.('.conversation-menu');
  if (!menu) return;
  if (e.key === 'Escape') {
    e.stopPropagation();
    closeMenu(true);
  } else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
    e.preventDefault();
    const items = [...menu.querySelectorAll('[role="menuitem"]')];
    const i = items.indexOf(document.activeElement);
    items[(i + (e.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length]?.focus();
  }
});
// A click anywhere else closes the menu.
document.addEventListener('click', (e) => {
  if (menuFor && !e.target.closest?.('.conversation-menu, button[data-menu]')) closeMenu();
});

// removeConversation deletes a conversation on the server; one that is
// open is left for a new one.
async function removeConversation(id) {
  const c = conversationList().find((x) => x.id === id);
  const s = c ? states.get(c.agentId) : null;
  if (s?.busy && sessions.get(c.agentId) === id) {
    announce('The conversation is being answered; stop it before deleting it');
    return;
  }
  try {
    await deleteSession(id);
  } catch (err) {
    announce(`Could not delete the conversation: ${explain(err)}`);
    return;
  }
  conversations.remove(id);
  serverList = serverList?.filter((x) => x.id !== id) ?? null;
  if (c && sessions.get(c.agentId) === id) {
    sessions.set(c.agentId, '');
    if (s) reset(s);
    if (s === current) selectAgent(c.agentId, { focus: false });
  }
  renderConversations();
  announce('Conversation deleted');
}
ui.log.addEventListener('click', (e) => {
  const btn = e.target.closest('button[data-action]');
  if (!btn || !current) return;
  switch (btn.dataset.action) {
    case 'approve':
    case 'deny': {
      const reason = btn.closest('.approval')?.querySelector('.approval-reason')?.value ?? '';
      answer(current, btn.dataset.approval, btn.dataset.action === 'approve', reason);
      break;
    }
    case 'copy-answer': {
      const turn = turnOf.get(btn.closest('article'));
      if (turn) copyText(textOf(turn), btn);
      break;
    }
    case 'copy-code':
      copyText(btn.closest('.code-block')?.querySelector('pre')?.textContent ?? '', btn);
      break;
    case 'regenerate':
      regenerate(current);
      break;
    case 'edit':
      startEdit(current);
      break;
    default:
  }
});
// A reason typed for an approval is sent with Enter as a denial would be
// ambiguous: Enter does nothing there but keep the text.
ui.log.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && e.target.classList?.contains('approval-reason')) e.preventDefault();
});
// Signing in: the key is tried on the agent list before anything else.
ui.keyForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const key = ui.keyInput.value.trim();
  if (key === '') return;
  storeKey(key, ui.keyRemember.checked);
  setApiKey(key);
  ui.keyInput.value = '';
  ui.keyError.textContent = '';
  start();
});
ui.signOut.addEventListener('click', () => {
  forgetKey();
  keyChannel?.postMessage({ type: 'signed-out' });
  location.reload();
});
ui.agentsToggle.addEventListener('click', () => setAgentsOpen(ui.agentsToggle.getAttribute('aria-expanded') !== 'true'));
ui.scrim.addEventListener('click', () => setAgentsOpen(false));
ui.newChatTop.addEventListener('click', newConversation);
ui.statusToggle.addEventListener('click', () => setStatusOpen(ui.statusToggle.getAttribute('aria-expanded') !== 'true'));
ui.aboutToggle.addEventListener('click', () => setAbout(ui.aboutToggle.getAttribute('aria-expanded') !== 'true'));
ui.dismissOffline.addEventListener('click', () => {
  ui.banner.hidden = true;
  try {
    localStorage.setItem(offlineNoticeKey, 'dismissed');
  } catch {
    // Dismissed for this page only.
  }
  announce('Notice dismissed');
  ui.input.focus();
});
document.addEventListener('keydown', (e) => {
  if (e.key !== 'Escape') return;
  if (ui.agentsPanel.classList.contains('open')) {
    setAgentsOpen(false);
    ui.agentsToggle.focus();
  } else if (ui.statusPanel.classList.contains('open')) {
    setStatusOpen(false);
    ui.statusToggle.focus();
  } else if (menuFor) {
    closeMenu(true);
  } else if (current?.editing && e.target === ui.input) {
    cancelEdit(current);
  } else if (current?.busy) {
    e.preventDefault();
    stop();
  }
});
// Another tab may add conversations; another browser, to the server's list.
addEventListener('storage', (e) => { if (e.key === null || e.key === 'agentdock.conversations') renderConversations(); });
addEventListener('focus', refreshConversations);
document.addEventListener('visibilitychange', () => { if (!document.hidden) refreshConversations(); });

// The message box grows with what is typed, up to its maximum height.
function fitInput() {
  ui.input.style.height = 'auto';
  ui.input.style.height = `${ui.input.scrollHeight}px`;
}
ui.input.addEventListener('input', fitInput);
// On a phone the dock (suggestions, composer) is fixed to the bottom: the
// conversation is padded by its height, whatever it holds, so that its
// last line is never under it.
new ResizeObserver(() => {
  document.documentElement.style.setProperty('--dock-h', `${ui.dock.offsetHeight}px`);
}).observe(ui.dock);

// showSignIn shows the sign-in view instead of the chat.
function showSignIn(refused) {
  document.body.classList.add('signed-out');
  ui.signIn.hidden = false;
  ui.keyError.textContent = refused ? 'The server did not accept that key.' : '';
  try {
    ui.keyRemember.checked = localStorage.getItem(apiKeyKey) !== null;
  } catch {
    ui.keyRemember.checked = false;
  }
  ui.keyInput.focus();
}

// Phones open the status panel from the top bar; wider screens show it
// always.
const phone = matchMedia('(max-width: 640px)');
ui.statusDetails.open = !phone.matches;
phone.addEventListener('change', (e) => {
  ui.statusDetails.open = !e.matches;
  setStatusOpen(false);
});

async function start() {
  renderPanels();
  updateComposer();
  try {
    agents = await listAgents();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      if (!storedKey()) {
        // Another open tab may be signed in already.
        const shared = await askOpenTabs();
        if (shared) {
          storeKey(shared, false);
          setApiKey(shared);
          return start();
        }
      }
      const refused = Boolean(storedKey());
      if (refused) forgetKey();
      setApiKey('');
      showSignIn(refused);
      return;
    }
    ui.title.textContent = 'Agents unavailable';
    ui.log.append(errorMessage(`Could not load the agents: ${explain(err)}`));
    return;
  }
  document.body.classList.remove('signed-out');
  ui.signIn.hidden = true;
  ui.signOut.hidden = !storedKey();
  if (agents.length === 0) {
    ui.title.textContent = 'No agents';
    ui.log.append(errorMessage('The server hosts no agents.'));
    return;
  }
  let saved = '';
  try {
    saved = sessionStorage.getItem(agentKey) ?? '';
  } catch {
    // Storage disabled: start with the first agent.
  }
  selectAgent(saved, { focus: false });
  await refreshConversations();
  document.body.dataset.ready = 'true';
}

start();
