package door

import "github.com/agentdock-go/agentdock/llmorch"

// The official OpenAI clients (openai-node, openai-python, openai-go)
// retry an answer of 408, 409, 429 or 5xx twice by default, and the AI
// SDK retries the same statuses, unless the answer carries
// "x-should-retry: false" (which the OpenAI clients honour). A request
// that fails the same way every time it is sent must not be sent three
// times, each a turn and its model calls: its error either has a status
// no client retries, or says x-should-retry: false.

// noRetry are the codes whose request fails the same way when it is sent
// again, although their status is one that clients retry.
var noRetry = map[string]bool{
	// 409: the idempotency key was used for another request.
	"idempotency_key_reused": true,
	// 429: a budget resets at the time Retry-After says, not sooner.
	"budget_exceeded": true,
	// 409: the conflict is settled, a retry meets it again.
	"duplicate_request":            true,
	"session_agent_mismatch":       true,
	"regenerate_conflict":          true,
	"previous_response_not_latest": true,
	"approval_answered":            true,
	// 429: only deleting sessions, or their expiry, frees a place.
	"quota_exceeded": true,
	// 500: the stored session cannot be read, now or later.
	"session_corrupt": true,
	// The model's side, the same for the same request: the server's key
	// is refused, the provider refuses the request, the answer does not
	// fit the output budget (package provider's codes, named here so that
	// the server does not import the providers) or the response format.
	"provider_auth":           true,
	"invalid_request":         true,
	"output_limit":            true,
	llmorch.CodeInvalidOutput: true,
}

// Retryable reports whether a client should send a request that failed
// with code again: false for noRetry's codes, true otherwise (the status
// then decides, as the client's own rules say). WriteProblem says
// x-should-retry: false for the others.
func Retryable(code string) bool { return !noRetry[code] }
