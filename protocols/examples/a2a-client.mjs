// An A2A client (the official @a2a-js/sdk) that asks an agent of
// agentdock a question and prints the answer as it streams in.
//   node a2a-client.mjs [http://localhost:8080] [agent] [question]
import { randomUUID } from 'node:crypto';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [base = 'http://localhost:8080', agent = 'cognitive-reasoner', question = 'Compare tea and coffee'] = process.argv.slice(2);
// The agent's card names its JSON-RPC and HTTP+JSON endpoints.
const client = await new ClientFactory().createFromUrl(`${base}/a2a/${agent}/`);
const message = { messageId: randomUUID(), role: Role.ROLE_USER, parts: [{ content: { $case: 'text', value: question } }] };
for await (const { payload } of client.sendMessageStream({ message })) {
  if (payload.$case === 'artifactUpdate') process.stdout.write(payload.value.artifact.parts[0].content.value);
  if (payload.$case === 'statusUpdate' && payload.value.status.message) {
    const tool = payload.value.status.message.parts.map((p) => p.content.value?.toolCall?.name).find(Boolean);
    if (tool) console.log(`[calling ${tool}]`);
  }
  if (payload.$case === 'statusUpdate' && payload.value.status.state !== TaskState.TASK_STATE_WORKING) {
    console.log(`\n[task ${payload.value.taskId}: ${TaskState[payload.value.status.state]}]`);
  }
}
