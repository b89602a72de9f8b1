package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/tools/agenttool"
)

// The two bindings of the methods: JSON-RPC 2.0 over HTTP, and HTTP+JSON.
// Both stream over SSE: JSON-RPC wraps each StreamResponse in a response
// object with the request's id, HTTP+JSON sends it bare.

// rpcRequest is a JSON-RPC request.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// parseRPC reads a JSON-RPC request; on an error, the request's ID is the
// one to answer with (null when it has none).
func parseRPC(data []byte) (rpcRequest, *rpcError) {
	var req rpcRequest
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > 0 && data[0] == '[':
		return rpcRequest{ID: nullID}, errf(codeInvalidRequest, "batches are not served: send one request per POST")
	case json.Unmarshal(data, &req) != nil:
		return rpcRequest{ID: nullID}, errf(codeParse, "the body is not a JSON-RPC request object")
	}
	id := req.ID
	if len(id) == 0 || (id[0] != '"' && (id[0] < '0' || id[0] > '9') && id[0] != '-') {
		return rpcRequest{ID: nullID}, errf(codeInvalidRequest, "id must be a string or a number (A2A has no notifications)")
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		return req, errf(codeInvalidRequest, `a request needs "jsonrpc": "2.0" and a method`)
	}
	return req, nil
}

// versionOK checks the A2A-Version header: absent, or a 1.x version.
func versionOK(r *http.Request) *rpcError {
	v := r.Header.Get("A2A-Version")
	if v == "" || v == "1" || strings.HasPrefix(v, "1.") {
		return nil
	}
	return errf(codeVersion, "A2A-Version %q is not served; this server speaks A2A %s", clip(v), ProtocolVersion)
}

// callDepth reads the request's depth in agent calls (the
// agenttool.DepthHeader an agent tool of another server sends): its turns
// run at that depth, so that their own agent tools go one deeper, and a
// request past Config.MaxCallDepth is refused, which ends a circle of
// servers whose agents ask one another.
func (e *Edge) callDepth(r *http.Request) (context.Context, *rpcError) {
	d, err := agenttool.ParseDepth(r.Header.Get(agenttool.DepthHeader))
	if err != nil {
		return nil, errf(codeInvalidRequest, "%s", err.Error())
	}
	if d > e.cfg.MaxCallDepth {
		return nil, errf(codeInvalidRequest, "this request is agent call %d in a chain of agents asking agents (%s), and this server allows %d (AGENT_CALL_DEPTH): answer with what you have", d, agenttool.DepthHeader, e.cfg.MaxCallDepth)
	}
	return agenttool.WithDepth(r.Context(), d), nil
}

// jsonRPC serves one JSON-RPC request; agentID is the URL's agent ("" at
// /a2a).
func (e *Edge) jsonRPC(w http.ResponseWriter, r *http.Request, agentID string) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, rpcResponse{JSONRPC: "2.0", ID: nullID, Error: errf(codeInvalidRequest, "the request body is over the limit of %d bytes", mbe.Limit)})
		}
		return
	}
	req, perr := parseRPC(data)
	if perr != nil {
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: req.ID, Error: perr})
		return
	}
	id := req.ID
	if verr := versionOK(r); verr != nil {
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Error: verr})
		return
	}
	ctx, derr := e.callDepth(r)
	if derr != nil {
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Error: derr})
		return
	}
	s := newSSE(w)
	c := call{owner: door.Owner(r), agentID: agentID, method: req.Method, params: req.Params}
	result, rerr := e.invoke(ctx, c, func(ev StreamResponse) bool {
		return s.send(rpcResponse{JSONRPC: "2.0", ID: id, Result: ev})
	})
	switch {
	case s.started && rerr != nil:
		s.send(rpcResponse{JSONRPC: "2.0", ID: id, Error: rerr})
	case s.started:
	case rerr != nil:
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Error: rerr})
	case result == nil:
		// A streaming method that ended before its first event.
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Error: errf(codeInternal, "the stream ended before it began")})
	default:
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Result: result})
	}
}

// sseWriter starts an SSE response at its first event.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	failed  bool
}

func newSSE(w http.ResponseWriter) *sseWriter {
	rc := http.NewResponseController(w)
	// A blocking SendMessage waits for its whole turn, a stream lasts as
	// long: neither may be cut by the server's write timeout.
	_ = rc.SetWriteDeadline(time.Time{})
	return &sseWriter{w: w, rc: rc}
}

// send writes one event; false once the client is gone.
func (s *sseWriter) send(v any) bool {
	if s.failed {
		return false
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	data, _ := json.Marshal(v)
	var b bytes.Buffer
	b.Grow(len(data) + 8)
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := s.w.Write(b.Bytes()); err != nil {
		s.failed = true
		return false
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
	return !s.failed
}

// restStatus maps an error code to the HTTP+JSON binding's status and
// reason.
func restStatus(code int) (int, string) {
	switch code {
	case codeTaskNotFound:
		return http.StatusNotFound, "TASK_NOT_FOUND"
	case codeNotCancelable:
		return http.StatusConflict, "TASK_NOT_CANCELABLE"
	case codeNoPush:
		return http.StatusBadRequest, "PUSH_NOTIFICATION_NOT_SUPPORTED"
	case codeUnsupported:
		return http.StatusBadRequest, "UNSUPPORTED_OPERATION"
	case codeVersion:
		return http.StatusBadRequest, "VERSION_NOT_SUPPORTED"
	case codeNoExtendedCard:
		return http.StatusBadRequest, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
	case codeInvalidParams, codeInvalidRequest, codeParse:
		return http.StatusBadRequest, "INVALID_PARAMS"
	case codeNoMethod:
		return http.StatusNotFound, "NOT_FOUND"
	}
	return http.StatusInternalServerError, "INTERNAL"
}

// restError answers an error of the HTTP+JSON binding: a google.rpc.Status
// with the A2A reason in an ErrorInfo.
func restError(w http.ResponseWriter, status int, reason, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": status, "status": http.StatusText(status), "message": msg,
		"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org"}},
	}})
}

func restRPCError(w http.ResponseWriter, e *rpcError) {
	status, reason := restStatus(e.Code)
	restError(w, status, reason, e.Message)
}

// rest serves the HTTP+JSON binding under /a2a/{agent}/; sub is the path
// after the agent.
func (e *Edge) rest(w http.ResponseWriter, r *http.Request, agentID, sub string) {
	if verr := versionOK(r); verr != nil {
		restRPCError(w, verr)
		return
	}
	ctx, derr := e.callDepth(r)
	if derr != nil {
		restRPCError(w, derr)
		return
	}
	c := call{owner: door.Owner(r), agentID: agentID}
	var params any
	switch {
	case sub == "message:send" && r.Method == http.MethodPost:
		c.method = "SendMessage"
	case sub == "message:stream" && r.Method == http.MethodPost:
		c.method = "SendStreamingMessage"
	case sub == "tasks" && r.Method == http.MethodGet:
		c.method = "ListTasks"
		q := r.URL.Query()
		p := map[string]any{}
		for _, k := range []string{"contextId", "status", "pageToken", "statusTimestampAfter"} {
			if v := q.Get(k); v != "" {
				p[k] = v
			}
		}
		for _, k := range []string{"pageSize", "historyLength"} {
			if v := q.Get(k); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					restRPCError(w, errf(codeInvalidParams, "%s must be an integer, not %q", k, clip(v)))
					return
				}
				p[k] = n
			}
		}
		p["includeArtifacts"] = q.Get("includeArtifacts") == "true"
		params = p
	case strings.HasPrefix(sub, "tasks/"):
		id, rest, _ := strings.Cut(strings.TrimPrefix(sub, "tasks/"), "/")
		id, verb, _ := strings.Cut(id, ":")
		switch {
		case rest == "" && verb == "" && r.Method == http.MethodGet:
			p := taskRequest{ID: id}
			if v := r.URL.Query().Get("historyLength"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					restRPCError(w, errf(codeInvalidParams, "historyLength must be an integer, not %q", clip(v)))
					return
				}
				p.HistoryLength = &n
			}
			c.method, params = "GetTask", p
		case rest == "" && verb == "cancel" && r.Method == http.MethodPost:
			c.method, params = "CancelTask", taskRequest{ID: id}
		case rest == "" && verb == "subscribe" && (r.Method == http.MethodPost || r.Method == http.MethodGet):
			c.method, params = "SubscribeToTask", taskRequest{ID: id}
		case rest == "pushNotificationConfigs" && verb == "" && r.Method == http.MethodPost:
			c.method = "CreateTaskPushNotificationConfig"
		case rest == "pushNotificationConfigs" && verb == "" && r.Method == http.MethodGet:
			c.method, params = "ListTaskPushNotificationConfigs", pushConfigRequest{TaskID: id}
		case strings.HasPrefix(rest, "pushNotificationConfigs/") && verb == "" && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
			c.method = "GetTaskPushNotificationConfig"
			if r.Method == http.MethodDelete {
				c.method = "DeleteTaskPushNotificationConfig"
			}
			params = pushConfigRequest{TaskID: id, ID: strings.TrimPrefix(rest, "pushNotificationConfigs/")}
		}
		if c.method == "CreateTaskPushNotificationConfig" {
			var p TaskPushNotificationConfig
			if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
				restRPCError(w, errf(codeInvalidParams, "the body is not a push notification config: %s", err.Error()))
				return
			}
			p.TaskID = id
			params = p
		}
	}
	if c.method == "" {
		restError(w, http.StatusNotFound, "NOT_FOUND", "no A2A endpoint "+r.Method+" /a2a/"+agentID+"/"+sub)
		return
	}
	if params != nil {
		c.params, _ = json.Marshal(params)
	} else {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			restRPCError(w, errf(codeInvalidRequest, "the body could not be read"))
			return
		}
		c.params = data
	}
	s := newSSE(w)
	result, rerr := e.invoke(ctx, c, func(ev StreamResponse) bool { return s.send(ev) })
	switch {
	case s.started && rerr != nil:
		s.send(map[string]any{"error": map[string]any{"code": rerr.Code, "message": rerr.Message}})
	case s.started:
	case rerr != nil:
		restRPCError(w, rerr)
	case c.method == "DeleteTaskPushNotificationConfig":
		w.WriteHeader(http.StatusNoContent)
	case result == nil:
		restRPCError(w, errf(codeInternal, "the stream ended before it began"))
	default:
		writeJSON(w, http.StatusOK, result)
	}
}
