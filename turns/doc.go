// Package turns is the turn runtime: it runs the turns of a set of agents
// (agent.Set) in the background, on this replica and, with a shared turn
// log (Config.Log), across the replicas of a deployment, for every door of
// the server and for a Go program alike (docs/turns.md).
//
// Its face is a few verbs: Runtime.Start with one Input (the agent's
// input, the agent, the session, the busy policy), Turn.Events from a
// position, Runtime.Stop, and Runtime.Turn and Runtime.Running to find a
// turn again. Its policies are the same whichever door a request came
// through: a template's options.busy (reject, enqueue, interrupt), the
// idempotency keys (a retry gets the turn its key started), and, across
// replicas, the takeover or recovery of a turn whose replica died. A
// turn's log holds its chat.Events, numbered from 1 the same way on every
// replica; each door maps them to its bytes at its edge.
//
// It links no HTTP framework and no SSE library (deps_test.go checks it):
// those are the doors'.
package turns
