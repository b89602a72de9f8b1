// Wires the page together: the agent picker, the composer, and one turn at a
// time per agent streamed into the transcript and the side panel. Each agent
// keeps its own transcript, session, orchestration and usage, so switching
// agents and back loses nothing, and a turn still streaming keeps updating
// its agent's (possibly hidden) transcript.

import { ApiError, getSession, listAgents, resumeTurn, setApiKey, streamTurn } from './api.js';
import { Sessions, applyChunk, historyEntries, newTurn, snapshotOf, usageOf } from './state.js';
import {
  TurnView, errorMessage, noteMessage, renderAgents, renderOrchestration,
  renderSuggestions, renderUsage, userMessage,
} from './render.js';

const $ = (id) => document.getElementById(id);
const ui = {
  agentList: $('agent-list'),
  agentsPanel: $('agents-panel'),
  agentsToggle: $('agents-toggle'),
  title: $('agent-title'),
  desc: $('agent-desc'),
  newChat: $('new-chat'),
  banner: $('offline-banner'),
  log: $('log'),
  suggestions: $('suggestions'),
  form: $('composer'),
  input: $('composer-input'),
  send: $('send'),
  orchestration: $('orchestration'),
  usage: $('usage'),
  sessionId: $('session-id'),
  statusDetails: $('status-details'),
  statusSummary: $('status-summary'),
  announcer: $('announcer'),
  keyForm: $('key-form'),
  keyInput: $('key-input'),
  keyError: $('key-error'),
};

// The API key lives in sessionStorage: it is sent as x-api-key and forgotten
// when the tab closes. The form shows only when the server answers 401.
const apiKeyKey = 'agentdock.apiKey';
function storedKey() {
  try {
    return sessionStorage.getItem(apiKeyKey) ?? '';
  } catch {
    return '';
  }
}
setApiKey(storedKey());

const sessions = new Sessions(globalThis.sessionStorage);
const agentKey = 'agentdock.agent';
let agents = [];
let current = null; // the selected agent's state

// agentState holds what the page shows for one agent while another is selected.
const states = new Map();
function stateOf(agent) {
  let s = states.get(agent.id);
  if (!s) {
    s = { agent, transcript: document.createDocumentFragment(), orchestration: null, turnUsage: null, sessionUsage: null, busy: false, greeted: false };
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
  ui.send.disabled = busy || !current;
  ui.send.textContent = busy ? 'Answering…' : 'Send';
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
  ui.desc.textContent = agent.description;
  ui.banner.hidden = !agent.offline;
  renderSuggestions(ui.suggestions, agent.chatPrompts);
  renderPanels();
  updateComposer();
  setAgentsOpen(false);
  if (focus) ui.input.focus();
}

function setAgentsOpen(open) {
  ui.agentsToggle.setAttribute('aria-expanded', String(open));
  ui.agentsPanel.classList.toggle('open', open);
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

async function send(text) {
  const s = current;
  text = text.trim();
  if (!s || s.busy || text === '') return;
  const agentId = s.agent.id;
  s.busy = true;
  updateComposer();
  appendTo(s, userMessage(text));
  await play(s, (callbacks) => streamTurn({ agentId, sessionId: sessions.get(agentId), message: text, ...callbacks }));
}

// play shows one assistant turn as start(callbacks) streams it, and keeps the
// side panel in step. s.busy must be set by the caller and is cleared here.
async function play(s, start) {
  const agentId = s.agent.id;
  const turn = newTurn();
  const view = new TurnView();
  appendTo(s, view.el);
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
        if (s === current) renderPanels();
      },
      onReconnect(attempt) {
        view.setStatus(`Connection lost; reconnecting (attempt ${attempt})…`);
      },
      onChunk(chunk) {
        const changed = applyChunk(turn, chunk);
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
  } finally {
    if (frame) cancelAnimationFrame(frame);
    turn.finished = true;
    draw();
    view.done();
    if (turn.parts.length === 0) view.el.remove();
    s.busy = false;
    if (s === current) {
      updateComposer();
      renderPanels();
      announce('Answer complete');
    }
  }
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
    sessions.set(s.agent.id, '');
    appendTo(s, noteMessage('Your earlier conversation has expired; your next message starts a new one.'));
  }
  const running = Boolean(view?.turn?.running);
  if (view) {
    for (const e of historyEntries(view.messages, { dropAfterLastUser: running })) {
      if ('user' in e) {
        appendTo(s, userMessage(e.user));
      } else {
        const tv = new TurnView();
        tv.sync(e.turn);
        tv.done();
        appendTo(s, tv.el);
      }
    }
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

function newConversation() {
  if (!current || current.busy) return;
  sessions.set(current.agent.id, '');
  ui.log.replaceChildren();
  current.greeted = false;
  current.orchestration = null;
  current.turnUsage = null;
  current.sessionUsage = null;
  selectAgent(current.agent.id);
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
  if (!current || current.busy || text.trim() === '') return;
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
ui.keyForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const key = ui.keyInput.value.trim();
  if (key === '') return;
  try {
    sessionStorage.setItem(apiKeyKey, key);
  } catch {
    // Storage disabled: the key lasts until the page is reloaded.
  }
  setApiKey(key);
  ui.keyInput.value = '';
  ui.keyForm.hidden = true;
  ui.log.replaceChildren();
  start();
});
ui.agentsToggle.addEventListener('click', () => setAgentsOpen(ui.agentsToggle.getAttribute('aria-expanded') !== 'true'));
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && ui.agentsPanel.classList.contains('open')) {
    setAgentsOpen(false);
    ui.agentsToggle.focus();
  }
});

async function start() {
  // Phones start with the status panel folded to its summary line; wider
  // screens hide the summary, so the panel must be open there.
  const phone = matchMedia('(max-width: 640px)');
  ui.statusDetails.open = !phone.matches;
  phone.addEventListener('change', (e) => { ui.statusDetails.open = !e.matches; });
  renderPanels();
  updateComposer();
  try {
    agents = await listAgents();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      ui.title.textContent = 'API key required';
      ui.keyError.textContent = storedKey() ? 'The server did not accept that key.' : '';
      ui.keyForm.hidden = false;
      ui.keyInput.focus();
      return;
    }
    ui.title.textContent = 'Agents unavailable';
    ui.log.append(errorMessage(`Could not load the agents: ${explain(err)}`));
    return;
  }
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
  document.body.dataset.ready = 'true';
}

start();
