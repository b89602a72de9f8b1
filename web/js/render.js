// DOM rendering. Model output is markdown and untrusted: it reaches the page
// only through renderMarkdown (marked, then DOMPurify), and every other string
// from the server is set with textContent. Nothing here uses inline handlers
// or style attributes, so the page runs under a CSP of 'self' only.

import { marked } from '../vendor/marked.esm.js';
import { guardrailLine } from './guardrail.js';
import DOMPurify from '../vendor/purify.es.mjs';
import hljs from '../vendor/highlight.core.min.js';
import bash from '../vendor/highlight.bash.min.js';
import css from '../vendor/highlight.css.min.js';
import go from '../vendor/highlight.go.min.js';
import javascript from '../vendor/highlight.javascript.min.js';
import json from '../vendor/highlight.json.min.js';
import python from '../vendor/highlight.python.min.js';
import sql from '../vendor/highlight.sql.min.js';
import typescript from '../vendor/highlight.typescript.min.js';
import xml from '../vendor/highlight.xml.min.js';
import yaml from '../vendor/highlight.yaml.min.js';
import { searchSource } from './state.js';

marked.use({ gfm: true, breaks: false });

// Code blocks are highlighted by highlight.js (the core and the languages
// above, vendored). It escapes the code itself and reads it from the
// element's text, which DOMPurify produced.
for (const [name, lang] of Object.entries({ bash, css, go, javascript, json, python, sql, typescript, xml, yaml })) hljs.registerLanguage(name, lang);
hljs.configure({ ignoreUnescapedHTML: true });

/** highlightCode highlights the code blocks under root and gives each a Copy button. */
export function highlightCode(root) {
  for (const code of root.querySelectorAll('pre > code')) {
    const pre = code.parentElement;
    if (pre.parentElement?.classList.contains('code-block')) continue;
    const lang = /\blanguage-([\w-]+)/.exec(code.className)?.[1];
    if (lang && hljs.getLanguage(lang)) hljs.highlightElement(code);
    else code.classList.add('hljs');
    const wrap = h('div', { class: 'code-block' }, h('button', { type: 'button', class: 'copy small', 'data-action': 'copy-code', 'aria-label': 'Copy code', text: 'Copy' }));
    pre.replaceWith(wrap);
    wrap.prepend(pre);
  }
}

// Links from model output open elsewhere and cannot reach back to this page.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
  }
});

/** sanitize returns HTML safe to assign to innerHTML. */
export function sanitize(html) {
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form'], FORBID_ATTR: ['style'] });
}

/** renderMarkdown renders untrusted markdown into el. */
export function renderMarkdown(el, text) {
  el.innerHTML = sanitize(marked.parse(String(text ?? ''), { async: false }));
}

/** h builds an element; children are nodes or strings (set as text, never HTML). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== undefined && c !== null) el.append(c);
  return el;
}

const fmt = (n) => Number(n).toLocaleString('en-US');

/**
 * usageText says "1,234 tokens (1,000 in, 234 out)", how much of the
 * input the provider's prompt cache served: "(1,000 in, 800 cached, 234
 * out)", and, when the server prices the models (MODEL_PRICES), what
 * the tokens cost, in its prices' currency: "· cost 0.0012".
 */
export function usageText(u) {
  if (!u) return '—';
  const cached = u.cacheRead ? `, ${fmt(u.cacheRead)} cached` : '';
  const cost = u.cost ? ` · cost ${costText(u.cost)}` : '';
  return `${fmt(u.total)} tokens (${fmt(u.prompt)} in${cached}, ${fmt(u.completion)} out)${cost}`;
}

/** costText shows a cost with four significant digits: 0.001234, 12.35. */
const costText = (c) => Number(c).toLocaleString('en-US', { maximumSignificantDigits: 4 });

/**
 * userMessage renders what the user sent, as plain text, with an Edit
 * button that the page shows on the last one only (setEditable).
 */
export function userMessage(text) {
  return h('article', { class: 'msg user', 'aria-label': 'You said' }, h('p', { class: 'msg-text', text }),
    h('div', { class: 'msg-actions', hidden: true },
      h('button', { type: 'button', class: 'quiet small', 'data-action': 'edit', 'aria-label': 'Edit and resend this message', text: 'Edit' })));
}

/** setEditable shows or hides a user message's Edit button. */
export function setEditable(el, editable) {
  const actions = el?.querySelector('.msg-actions');
  if (actions) actions.hidden = !editable;
}

// A value longer than this, or on several lines, is folded in the
// approval card: its first line shows, the rest opens on demand.
const foldAfter = 120;

/**
 * argumentList shows a call's arguments as the person approving it reads
 * them: one row per argument, strings as written, other values as JSON,
 * long values folded.
 */
export function argumentList(input, inputText) {
  let args = input;
  if (args === undefined && inputText) {
    try {
      args = JSON.parse(inputText);
    } catch {
      args = inputText;
    }
  }
  const rows = args && typeof args === 'object' && !Array.isArray(args) ? Object.entries(args) : [['input', args]];
  if (rows.length === 0) return h('p', { class: 'approval-args muted small', text: 'No arguments.' });
  return h('dl', { class: 'approval-args' }, ...rows.flatMap(([k, v]) => {
    const text = typeof v === 'string' ? v : JSON.stringify(v, null, 2) ?? String(v);
    const long = text.length > foldAfter || text.includes('\n');
    const value = long
      ? h('details', { class: 'approval-arg-fold' },
        h('summary', { text: `${text.split('\n')[0].slice(0, foldAfter)}… (${text.length.toLocaleString('en-US')} characters)` }),
        h('pre', { class: 'approval-arg-full', text }))
      : h('span', { class: 'approval-arg-value', text });
    return [h('dt', { text: k }), h('dd', {}, value)];
  }));
}

/** noteMessage renders a line from the page itself (an agent's greeting, a notice). */
export function noteMessage(markdown, cls = 'note') {
  const body = h('div', { class: 'md' });
  renderMarkdown(body, markdown);
  return h('article', { class: `msg ${cls}` }, body);
}

/** errorMessage renders an error that ended a request before any answer came. */
export function errorMessage(text) {
  return h('article', { class: 'msg error', role: 'alert' }, h('p', { text }));
}

const toolStatus = {
  'input-streaming': 'preparing',
  'input-available': 'running',
  'approval-requested': 'waiting for your approval',
  'approval-responded': 'answered',
  'output-available': 'done',
  'output-error': 'failed',
  'output-denied': 'denied',
};

function statusOf(p) {
  if (p.state === 'output-error' && p.notConfigured) return 'not configured';
  if (p.state === 'approval-responded') return p.approved ? 'approved' : 'denied';
  if (p.state === 'output-denied' && p.note) return 'not run';
  return toolStatus[p.state] ?? p.state;
}

// sourceOf says where a search's results come from, for the card's
// summary: "Wikipedia · 3 results".
function sourceOf(p) {
  const content = typeof p.output === 'string' ? p.output : p.output?.content;
  const found = p.state === 'output-available' ? searchSource(content) : null;
  if (!found) return '';
  const n = `${found.count} result${found.count === 1 ? '' : 's'}`;
  return found.source ? `${found.source} · ${n}` : n;
}

function toolInputText(part) {
  if (part.input !== undefined) {
    try {
      return JSON.stringify(part.input, null, 2);
    } catch {
      return String(part.input);
    }
  }
  return part.inputText;
}

// A tool card: its name and status always in view, its input and output
// folded in a disclosure (a long search result does not push the answer
// away); a call that waits for approval shows its question and answers
// outside the fold.
function toolCard(part) {
  const status = h('span', { class: 'tool-status' });
  const name = h('span', { class: 'tool-name', text: part.toolName });
  const source = h('span', { class: 'tool-source', hidden: true });
  const input = h('pre', { class: 'tool-input-body' });
  const output = h('div', { class: 'tool-output md' });
  const details = h('details', { class: 'tool-details' },
    h('summary', {}, name, source, status),
    h('p', { class: 'label', text: 'Input' }), input,
    h('p', { class: 'label tool-output-label', text: 'Output' }), output);
  const approval = h('div', { class: 'approval', hidden: true });
  const notice = h('p', { class: 'tool-notice', role: 'status', hidden: true });
  const sub = subAnswer();
  const el = h('section', { class: 'tool-card', 'aria-label': `Tool ${part.toolName}` }, details, notice, approval);
  let asked = '';
  return {
    el,
    update(p) {
      el.dataset.state = p.state;
      el.dataset.tool = p.toolName;
      // Only the call of an agent tool gets the fold of the agent's work.
      if (p.agent && !sub.el.parentNode) details.after(sub.el);
      sub.update(p);
      name.textContent = p.toolName;
      status.textContent = statusOf(p);
      source.textContent = sourceOf(p);
      source.hidden = source.textContent === '';
      input.textContent = toolInputText(p);
      const hasOutput = p.state === 'output-available' || p.state === 'output-error';
      details.querySelector('.tool-output-label').hidden = !hasOutput;
      notice.hidden = true;
      if (p.state === 'output-error' && p.notConfigured) {
        // Not a failure: a service is not set up. Said calmly, in view.
        output.className = 'tool-output';
        output.removeAttribute('role');
        output.textContent = p.errorText;
        notice.hidden = false;
        const text = p.errorText.replace(/^tool "[^"]*" failed:\s*/i, '');
        notice.textContent = text.charAt(0).toUpperCase() + text.slice(1);
      } else if (p.state === 'output-error') {
        output.className = 'tool-output tool-error';
        output.setAttribute('role', 'alert');
        output.textContent = p.errorText;
      } else if (p.state === 'output-available') {
        output.className = 'tool-output md';
        output.removeAttribute('role');
        const o = p.output;
        if (typeof o === 'string') renderMarkdown(output, o);
        else if (o && typeof o.content === 'string') renderMarkdown(output, o.content);
        else output.replaceChildren(h('pre', { text: JSON.stringify(o, null, 2) }));
      } else if (p.state === 'output-denied') {
        output.replaceChildren();
        notice.hidden = false;
        notice.textContent = p.note || `You declined this call; it did not run.${p.reason ? ` Your reason: ${p.reason}` : ''}`;
      } else {
        output.replaceChildren();
      }
      approval.hidden = p.state !== 'approval-requested' && p.state !== 'approval-responded';
      if (p.state === 'approval-requested' && asked !== p.approvalId) {
        asked = p.approvalId;
        const reasonId = `reason-${p.approvalId}`;
        // An asked agent's call says which agent asks, and for what.
        const asks = p.agent?.asks?.approvalId === p.approvalId ? p.agent.asks : null;
        approval.replaceChildren(
          asks
            ? h('p', { class: 'approval-question' }, h('strong', { text: asks.agent }), ' (asked by this call) wants to run ', h('strong', { text: asks.toolName }), ' with:')
            : h('p', { class: 'approval-question' }, 'The agent wants to run ', h('strong', { text: p.toolName }), ' with:'),
          asks ? argumentList(asks.input) : argumentList(p.input, p.inputText),
          h('p', { class: 'approval-allow', text: 'Allow it?' }),
          h('label', { class: 'sr-only', for: reasonId, text: 'Reason (optional)' }),
          h('input', { id: reasonId, class: 'approval-reason', type: 'text', placeholder: 'Reason (optional)', maxlength: '500', autocomplete: 'off' }),
          h('div', { class: 'approval-buttons' },
            h('button', { type: 'button', class: 'approve', 'data-action': 'approve', 'data-approval': p.approvalId, text: 'Approve' }),
            h('button', { type: 'button', class: 'deny secondary', 'data-action': 'deny', 'data-approval': p.approvalId, text: 'Deny' })),
        );
      } else if (p.state === 'approval-responded') {
        asked = '';
        approval.replaceChildren(h('p', { class: 'approval-answer muted', text: p.approved ? 'Approved; running it…' : `Denied${p.reason ? `: ${p.reason}` : ''}.` }));
      }
    },
  };
}

// subAnswer is the work of the agent a tool call asked (an agent tool),
// folded under the card while it streams and after: its tool calls, then
// its answer. Nothing shows for other tools.
function subAnswer() {
  const title = h('span', { class: 'sub-answer-title' });
  const calls = h('ul', { class: 'sub-answer-calls' });
  const text = h('div', { class: 'md sub-answer-text' });
  const el = h('details', { class: 'sub-answer', hidden: true }, h('summary', {}, title), calls, text);
  return {
    el,
    update(p) {
      const a = p.agent;
      el.hidden = !a;
      if (!a) return;
      const running = p.state === 'input-available' || p.state === 'input-streaming';
      title.textContent = `${a.name}'s answer${running ? ' (working…)' : ''}`;
      calls.replaceChildren(...a.calls.map((c) => h('li', { 'data-state': c.state }, h('span', { class: 'tool-name', text: c.name }), ` ${c.state}`)));
      calls.hidden = a.calls.length === 0;
      renderMarkdown(text, a.failed ? `${a.text}\n\n*${a.failed}*` : a.text);
      el.classList.toggle('streaming', running);
    },
  };
}

function partView(part) {
  switch (part.kind) {
    case 'text': {
      const el = h('div', { class: 'md answer' });
      return {
        el,
        update: (p) => {
          renderMarkdown(el, p.text);
          el.classList.toggle('streaming', !p.done);
          if (p.done) highlightCode(el);
        },
      };
    }
    case 'stopped': {
      const el = h('p', { class: 'stopped', role: 'status' });
      return { el, update: () => { el.textContent = 'Stopped. The answer so far is kept.'; } };
    }
    case 'tool':
      return toolCard(part);
    case 'step': {
      const el = h('p', { class: 'step-change' });
      return {
        el,
        update: (p) => el.replaceChildren(
          'Step: ',
          h('strong', { text: p.activeStep || 'none' }),
          p.previousStep ? ` (was ${p.previousStep})` : '',
        ),
      };
    }
    case 'compaction': {
      const line = h('summary');
      const text = h('p', { class: 'compaction-summary' });
      const el = h('details', { class: 'compaction' }, line, text);
      return {
        el,
        update: (p) => {
          const turns = p.from === p.through ? `Turn ${p.from}` : `Turns ${p.from} to ${p.through}`;
          const saved = p.inputBefore > 0 ? ` (${p.inputBefore.toLocaleString()} → ${p.inputAfter.toLocaleString()} input tokens)` : '';
          line.textContent = `Conversation compacted: ${turns} summarized for the model${saved}. They stay here in full.`;
          text.textContent = p.summary;
        },
      };
    }
    case 'guardrail':
      return guardrailLine(h);
    case 'warning': {
      const el = h('p', { class: 'warning', role: 'status' });
      return { el, update: (p) => { el.textContent = `Warning: ${p.message}`; } };
    }
    case 'error': {
      const el = h('p', { class: 'turn-error', role: 'alert' });
      return { el, update: (p) => { el.textContent = p.message; } };
    }
    default:
      return { el: h('span'), update() {} };
  }
}

/**
 * TurnView shows one assistant turn and keeps it in step with the turn model:
 * sync() re-renders only the parts whose rev moved. The article is aria-busy
 * while streaming so a screen reader, reading the log politely, announces the
 * answer once it is complete rather than every token.
 */
export class TurnView {
  constructor() {
    this.body = h('div', { class: 'msg-body' });
    this.footer = h('footer', { class: 'msg-usage' });
    this.status = h('p', { class: 'msg-status', text: 'Thinking…' });
    this.regenerate = h('button', { type: 'button', class: 'secondary small', 'data-action': 'regenerate', text: 'Regenerate', hidden: true });
    // The answer's actions, and its token usage on the same line.
    this.actions = h('div', { class: 'msg-actions', hidden: true },
      h('button', { type: 'button', class: 'secondary small', 'data-action': 'copy-answer', text: 'Copy' }), this.regenerate, this.footer);
    this.el = h('article', { class: 'msg assistant', 'aria-label': 'Agent answered', 'aria-busy': 'true' }, this.body, this.status, this.actions);
    this.views = [];
    this.restarts = 0;
  }

  /** setActions shows Copy once the answer is complete, and Regenerate on the last answer only. */
  setActions({ visible, regenerate }) {
    this.actions.hidden = !visible;
    this.regenerate.hidden = !regenerate;
  }

  sync(turn) {
    if (this.restarts !== (turn.restarts ?? 0)) {
      // Another server took the turn over and parts were dropped: the
      // turn is shown anew.
      this.restarts = turn.restarts ?? 0;
      this.views = [];
      this.body.replaceChildren();
    }
    turn.parts.forEach((part, i) => {
      let v = this.views[i];
      if (!v) {
        v = partView(part);
        v.rev = -1;
        this.views[i] = v;
        this.body.append(v.el);
      }
      if (v.rev !== part.rev) {
        v.update(part);
        v.rev = part.rev;
      }
    });
    const u = turn.usage;
    this.footer.textContent = u.total || u.final ? `${u.final ? 'Turn' : 'So far'}: ${usageText(u)}` : '';
    if (turn.finished) this.done();
  }

  setStatus(text) {
    this.status.textContent = text;
    this.status.hidden = !text;
  }

  done() {
    this.setStatus('');
    this.el.setAttribute('aria-busy', 'false');
  }
}

/** renderOrchestration shows the active step, its sequence with the current position, and the offered tools. */
export function renderOrchestration(root, snap) {
  const step = root.querySelector('[data-o="step"]');
  const seq = root.querySelector('[data-o="sequence"]');
  const pos = root.querySelector('[data-o="position"]');
  const offered = root.querySelector('[data-o="offered"]');
  if (!snap) {
    step.textContent = 'Not started';
    seq.replaceChildren();
    pos.textContent = '';
    offered.replaceChildren(h('li', { class: 'muted', text: 'Send a message to see the tools offered.' }));
    return;
  }
  step.textContent = snap.activeStep || 'No active step';
  root.dataset.activeStep = snap.activeStep;
  const n = snap.sequence.length;
  seq.replaceChildren(...snap.sequence.map((tool, i) => {
    const state = i < snap.sequenceIndex ? 'done' : i === snap.sequenceIndex ? 'current' : 'next';
    return h('li', { class: `seq-${state}`, 'aria-current': state === 'current' ? 'step' : undefined }, h('span', { text: tool }));
  }));
  pos.textContent = n === 0 ? 'No enforced sequence' : snap.sequenceIndex >= n ? `Sequence complete (${n} of ${n})` : `Next: ${snap.sequence[snap.sequenceIndex]} (${snap.sequenceIndex + 1} of ${n})`;
  offered.replaceChildren(...(snap.offeredTools.length
    ? snap.offeredTools.map((t) => h('li', { class: 'chip', text: t }))
    : [h('li', { class: 'muted', text: 'No tools offered' })]));
}

/** renderUsage shows the last turn's and the session's token usage. */
export function renderUsage(root, turnUsage, sessionUsage) {
  root.querySelector('[data-u="turn"]').textContent = turnUsage && (turnUsage.total || turnUsage.final) ? usageText(turnUsage) : '—';
  root.querySelector('[data-u="session"]').textContent = sessionUsage ? usageText(sessionUsage) : '—';
}

/** renderAgents fills the agent picker; the selected agent's button is aria-pressed. */
export function renderAgents(list, agents, selectedId) {
  list.replaceChildren(...agents.map((a) => h('li', {},
    h('button', { type: 'button', class: 'agent', 'data-agent': a.id, 'aria-pressed': a.id === selectedId ? 'true' : 'false', title: a.description || undefined },
      h('span', { class: 'agent-name', text: a.name }),
      a.offline ? h('span', { class: 'badge', text: 'offline' }) : null,
      a.description ? h('span', { class: 'agent-desc', text: a.description }) : null))));
}

/** renderSuggestions shows an agent's chat prompts as buttons. */
export function renderSuggestions(list, prompts) {
  list.replaceChildren(...prompts.map((p) => h('li', {}, h('button', { type: 'button', class: 'suggestion', 'data-prompt': p, text: p }))));
  list.hidden = prompts.length === 0;
}
