module github.com/agentdock-go/agentdock/loadtest

go 1.26.0

require (
	github.com/agentdock-go/agentdock v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// The harness measures the product at the same commit: the parent directory.
replace github.com/agentdock-go/agentdock => ../
