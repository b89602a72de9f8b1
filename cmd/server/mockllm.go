package main

import (
	"context"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

func mockllmServe(ctx context.Context, addr string) error {
	return mockllm.ListenAndServe(ctx, addr, mockllm.Config{MaxRecorded: -1})
}
