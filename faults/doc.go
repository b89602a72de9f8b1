// Package faults holds fault tests of the whole runtime: each runs the real
// `agentdock serve` binary as a child process, with a real redis-server
// (session/redistest) and an in-process mock model server
// (llmorch/mockllm) on loopback HTTP, breaks one of them on purpose and
// checks what a client sees and what the store keeps. mcp_test.go does the
// same with MCP servers from npm (tools/mcp/testdata/servers): a server
// killed mid-call, one that cannot start, SIGTERM ending every child;
// mcp_hostile_test.go with the hostile server of tools/mcp/testdata/hostile:
// 15 MB results, an endless tool list, a 10 MB schema (memory, session and
// model request sizes), and a SIGKILL of the runtime while a server it
// started through sh -c runs with a setsid daemon (no process left).
// quota_test.go floods the runtime as one API key would: sessions past the
// key's quota (another key's stay readable), and wrong keys from one
// address. durable_test.go retries: the same AI SDK body on two replicas,
// and again after its replica was SIGKILLed (one turn, one model call);
// busy sessions on two replicas (enqueue, interrupt); a background run's
// signed webhook retried after a 500. earlykill_test.go kills a replica
// 30-60 ms into a turn and retries it on another (the turn is run or
// turn_interrupted, never an empty finish stop); twotakeovers_test.go
// kills two replicas during two calls of one turn of a counted,
// non-idempotent MCP tool (each call runs at most once). failover_test.go
// fails the Redis primary under load (Sentinel: a SIGKILL, or a manual
// SENTINEL FAILOVER with two replicas; Cluster: a SIGKILL, or a manual
// CLUSTER FAILOVER) and checks that no turn that finished stop lost text. routing_test.go checks cost
// control: a model that answers 503 is answered by its fallback, a step's
// model takes its calls, and token budgets per key hold on two replicas
// sharing Redis (50 concurrent turns of one key; the figure is logged). // Issue 55's, each printing its
// figures: mcp_sessions_test.go floods /mcp with initialize requests
// against an RSS bound and the session caps, and sets a sessionless
// tools/list's CPU beside GET /api/agents'; budget_test.go sends a forged
// compaction item, 700 KB images turn after turn (the model request's
// size), and a live session past BYTES_PER_OWNER on both stores;
// queue_test.go counts Redis's commands while hundreds of messages wait
// for busy sessions; webhook_tenants_test.go has two keys post to one
// webhook receiver. Issue 57's, with the default configuration:
// handover_test.go restarts three replicas one after the other under 30
// conversations (every turn finishes stop, as shown, no completed tool
// call runs twice), SIGTERMs the replica running a turn (the client
// resumes elsewhere) and SIGKILLs one (the turn goes on elsewhere within
// 15 s); webhook_replica_test.go kills the replica that owes a webhook
// call (the other makes it, same webhook-id); renewal_test.go measures
// what the lease renewals and signs of life cost Redis.
//
// The package has no code of its own: only tests and their harness
// (harness_test.go). The fast tests run in `go test ./faults/`; the slow
// variants (many kill points, the stall test with many streams) run only
// with AGENTDOCK_SLOW_FAULTS=1 (`make faults`).
package faults
