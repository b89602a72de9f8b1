// An AG-UI client (@ag-ui/client's HttpAgent) that runs an agent of
// agentdock, approves the tool calls it holds, and prints the answer and
// the orchestration state it shares.
//   node agui-client.mjs [http://localhost:8080] [agent] [message]
import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

const [base = 'http://localhost:8080', agentId = 'planner', text = 'search the web for offsite venue prices'] = process.argv.slice(2);
const agent = new HttpAgent({ url: `${base}/api/agui/${agentId}`, threadId: `thread-${randomUUID()}` });
agent.addMessage({ id: randomUUID(), role: 'user', content: text });
const print = {
  onTextMessageContentEvent: ({ event }) => { process.stdout.write(event.delta); },
  onToolCallStartEvent: ({ event }) => { console.log(`[calling ${event.toolCallName}]`); },
  onRunFinishedEvent: ({ event }) => { console.log(`\n[run finished: ${event.outcome?.type ?? 'success'}]`); },
};
let resume;
for (;;) {
  await agent.runAgent({ runId: randomUUID(), resume }, print);
  if (agent.pendingInterrupts.length === 0) break;
  // A person would decide here; this client approves every held call.
  resume = agent.pendingInterrupts.map((i) => {
    console.log(`[approving: ${i.message}]`);
    return { interruptId: i.id, status: 'resolved', payload: { approved: true } };
  });
}
console.log(`[active step: ${agent.state.orchestration?.activeStep}]`);
