// A guardrail of the agent's template matched (the stream's data-guardrail
// part): which guardrail, where, and what it did. The part never holds the
// text that matched; a redaction shows in the answer itself as a marker such
// as [redacted:credit_card]. DOM-free but for guardrailLine, which takes the
// page's element helper, so that the page's redesign can restyle it freely.

const stages = { input: 'your message', output: 'the answer', tool_arguments: "a tool call's arguments", tool_result: "a tool's result" };
const actions = { block: 'blocked', redact: 'redacted', approve: 'held for your approval', log: 'noted' };
// What a check that is not a kind of data found.
const checks = { regex: 'a match', deny: 'a denied word', max_length: 'text over its length limit', model: 'what its model looks for' };

/** guardrailPart turns a data-guardrail chunk's data into a part of the turn. */
export function guardrailPart(d = {}) {
  return {
    kind: 'guardrail',
    name: String(d.name ?? ''),
    on: String(d.on ?? ''),
    action: String(d.action ?? ''),
    matched: String(d.kind ?? ''),
    toolName: String(d.toolName ?? ''),
    message: String(d.message ?? ''),
  };
}

/** guardrailText is the line the page shows for a guardrail part. */
export function guardrailText(p) {
  const where = stages[p.on] ?? p.on;
  const what = actions[p.action] ?? p.action;
  const tool = p.toolName ? ` (${p.toolName})` : '';
  const named = p.matched.replaceAll('_', ' ');
  const kind = checks[p.matched] ?? (named ? `${/^[aeiou]/.test(named) ? 'an' : 'a'} ${named}` : 'a match');
  if (p.action === 'approve') return `Guardrail “${p.name}” found ${kind} in ${where}${tool} and holds the call for your approval.`;
  return `Guardrail “${p.name}” ${what} ${kind} in ${where}${tool}.`;
}

/** guardrailLine renders a guardrail part with the page's element helper h. */
export function guardrailLine(h) {
  const el = h('p', { class: 'warning guardrail', role: 'status' });
  return { el, update: (p) => { el.textContent = guardrailText(p); el.title = p.message; } };
}
