// Package orchestration is the pure core of the runtime: the rules of an
// agent template's orchestration (AgentDock's "steps", or modes), as
// ../shared/spec/orchestration.md states them and docs/orchestration.md
// explains them to template authors.
//
// An Engine is compiled once from a template's orchestration Spec (New,
// which reports every problem as Diagnostics located by step and field) and
// never changes. It keeps no session data: a session's State is plain data
// that any store can keep, and the Engine is a function of it,
//
//	(engine, state, input)        -> (state, decision)   Engine.Apply
//	(engine, state)               -> the tools to offer  Engine.Offer
//	(engine, state, conversation) -> state               Engine.Replay
//
// An Input is a user message, a tool the model used (judged against what
// the model call that made it was offered: ToolUsedIn and Judge, the one
// decision about a call, which every path that makes one asks), the token usage of
// a model call, or the answer to the latest message dropped and given again
// (Regenerate, which restores the state's TurnStart); the Decision says
// whether a tool call is refused (with the text the model receives, naming
// the step, its sequence position and the tools it may use), whether the
// active step changed, and whether a sequence advanced. Replay derives a
// state from a conversation by the same rules, so that a session's history
// replays to the session's state. Apply never performs I/O and never fails at run time:
// a bad regular expression or a missing condition value is a compile-time
// error, not a silent false.
//
// Everything around the engine (storing states atomically, running the
// model, executing tools, streaming over HTTP) lives in other packages and
// takes its decisions from here only: the refusal of a tool call is decided
// by Apply wherever the call is detected. Callers that know a tool cannot
// run right now (an MCP server that is down) say so through Available, an
// input like any other.
package orchestration
