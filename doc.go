// Package agentdock is the root of the module: an LLM-agent runtime with
// built-in orchestration, which serves AgentDock's agent templates
// (template.json) over HTTP and other agent protocols (the agentdock
// command, cmd/server) or runs them inside a Go program. It holds no code:
// README.md is the guide, and the packages are the API:
//
//   - agent: the agents of templates, loaded in one call (agent.Load), and
//     their turns (Agent.Run);
//   - turns: the turn runtime, which runs turns in the background, across
//     replicas, for every door;
//   - server, and the doors beside it (server/openai, server/a2a,
//     server/agui, server/mcpserver): the protocols;
//   - template, orchestration, llmorch, tools, session, chat: what a turn
//     is made of.
package agentdock
