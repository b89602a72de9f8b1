package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// listRequest is the params of ListTasks.
type listRequest struct {
	ContextID            string          `json:"contextId,omitempty"`
	Status               string          `json:"status,omitempty"`
	PageSize             *int            `json:"pageSize,omitempty"`
	PageToken            string          `json:"pageToken,omitempty"`
	HistoryLength        *int            `json:"historyLength,omitempty"`
	StatusTimestampAfter json.RawMessage `json:"statusTimestampAfter,omitempty"`
	IncludeArtifacts     bool            `json:"includeArtifacts,omitempty"`
}

// listResponse is the result of ListTasks.
type listResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int    `json:"pageSize"`
	TotalSize     int    `json:"totalSize"`
}

// Bounds of ListTasks' pageSize.
const (
	defaultPageSize = 50
	maxPageSize     = 100
)

var states = []string{StateSubmitted, StateWorking, StateCompleted, StateFailed, StateCanceled, StateInputRequired, StateRejected, "TASK_STATE_AUTH_REQUIRED"}

// after reads statusTimestampAfter: an RFC 3339 time, or milliseconds
// since the epoch.
func after(raw json.RawMessage) (time.Time, *rpcError) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	return time.Time{}, errf(codeInvalidParams, "statusTimestampAfter %q is neither an RFC 3339 time nor non-negative milliseconds since the epoch", clip(s))
}

// pageOffset reads a page token: the offset of the page in the list.
func pageOffset(token string) (int, *rpcError) {
	if token == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	rest, ok := strings.CutPrefix(string(b), "offset:")
	n, cerr := strconv.Atoi(rest)
	if err != nil || cerr != nil || !ok || n < 0 {
		return 0, errf(codeInvalidParams, "pageToken %q is not a token this server gave", clip(token))
	}
	return n, nil
}

// listTasks serves ListTasks: the caller's tasks, newest status first,
// filtered and in pages (an opaque token for the next).
func (e *Edge) listTasks(ctx context.Context, owner string, p listRequest) (any, *rpcError) {
	size := defaultPageSize
	if p.PageSize != nil {
		size = *p.PageSize
	}
	if size < 1 || size > maxPageSize {
		return nil, errf(codeInvalidParams, "pageSize must be from 1 to %d, not %d", maxPageSize, size)
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return nil, errf(codeInvalidParams, "historyLength must not be negative")
	}
	if p.Status != "" && !slices.Contains(states, p.Status) {
		return nil, errf(codeInvalidParams, "status %q is not a task state (%s)", clip(p.Status), strings.Join(states, ", "))
	}
	since, rerr := after(p.StatusTimestampAfter)
	if rerr != nil {
		return nil, rerr
	}
	offset, rerr := pageOffset(p.PageToken)
	if rerr != nil {
		return nil, rerr
	}
	ids, err := e.cfg.Index.Recent(ctx, owner, MaxListed)
	if err != nil {
		return nil, e.storeErr(err, "(list)")
	}
	type dated struct {
		t  Task
		at time.Time
	}
	var all []dated
	for _, id := range ids {
		rec, err := e.tasks.get(ctx, owner, id)
		if err != nil {
			continue // expired, or unreadable: not listed
		}
		t := rec.Task
		at, _ := time.Parse(time.RFC3339Nano, t.Status.Timestamp)
		if (p.ContextID != "" && t.ContextID != p.ContextID) || (p.Status != "" && t.Status.State != p.Status) || (!since.IsZero() && !at.After(since)) {
			continue
		}
		all = append(all, dated{t, at})
	}
	slices.SortStableFunc(all, func(a, b dated) int { return b.at.Compare(a.at) })
	out := listResponse{Tasks: []Task{}, PageSize: size, TotalSize: len(all)}
	for i := offset; i < len(all) && i < offset+size; i++ {
		t := all[i].t
		h := 0
		if p.HistoryLength != nil {
			h = *p.HistoryLength
		}
		t.History = t.History[max(0, len(t.History)-h):]
		if !p.IncludeArtifacts {
			t.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, t)
	}
	if offset+size < len(all) {
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(offset+size)))
	}
	return out, nil
}
