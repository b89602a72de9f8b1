package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
)

// listAnswer answers a sessionless tools/list (2026-07-28 on) from the
// result the SDK gave once, when the edge was built: the agents are fixed
// for the server's life, and so is their list. The SDK decodes a request
// about ten times over, each time into a new 32 KiB buffer, which made a
// tools/list cost fifteen times a GET /api/agents; answered here it costs
// about what that does. Only a request the SDK would answer with that
// very result is answered here: any other (a cursor, more _meta, another
// revision, a malformed body, a header the SDK checks) goes to the SDK.
type listAnswer struct {
	version string
	// result is the SDK's result, as JSON.
	result json.RawMessage
}

// renderList asks h for the tool list as a sessionless client of version
// would, and keeps the result; nil when the SDK did not answer one.
func renderList(h http.Handler, version string) *listAnswer {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientInfo":{"name":"agentdock","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	req.Header.Set("Mcp-Method", "tools/list")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil
	}
	data := rec.Body.Bytes()
	if i := bytes.Index(data, []byte("data: ")); strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") && i >= 0 {
		data, _, _ = bytes.Cut(data[i+len("data: "):], []byte("\n"))
	}
	var res struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(data, &res) != nil || res.ID != 1 || len(res.Result) == 0 {
		return nil
	}
	return &listAnswer{version: version, result: res.Result}
}

// listRequest is the one shape of sessionless tools/list answered here.
type listRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// serve answers r when it is a plain sessionless tools/list of the
// rendered revision, reporting whether it did; r's body is put back
// otherwise.
func (l *listAnswer) serve(w http.ResponseWriter, r *http.Request) bool {
	if l == nil || r.Method != http.MethodPost || r.Header.Get("Mcp-Protocol-Version") != l.version ||
		r.Header.Get("Mcp-Method") != "tools/list" || r.Header.Get("Mcp-Session-Id") != "" || r.Header.Get("Last-Event-ID") != "" ||
		!strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Type")), "application/json") ||
		!acceptsBoth(r.Header.Values("Accept")) || rebinding(r) {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || !l.plain(body) {
		return false
	}
	var req listRequest
	_ = json.Unmarshal(body, &req) // plain checked it
	var out bytes.Buffer
	out.Grow(len(l.result) + 64)
	out.WriteString(`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":`)
	out.Write(req.ID)
	out.WriteString(`,"result":`)
	out.Write(l.result)
	out.WriteString("}\n\n")
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes())
	return true
}

// plain reports whether body is one tools/list request without a cursor,
// whose _meta holds exactly the revision, a client's info and its
// capabilities, as objects of the right shape: the request the rendered
// result answers.
func (l *listAnswer) plain(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req listRequest
	if dec.Decode(&req) != nil || dec.More() || req.JSONRPC != "2.0" || req.Method != "tools/list" || len(req.Params.Meta) != 3 {
		return false
	}
	if !plainID(req.ID) {
		return false
	}
	var version string
	var info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	var caps map[string]json.RawMessage
	m := req.Params.Meta
	return json.Unmarshal(m["io.modelcontextprotocol/protocolVersion"], &version) == nil && version == l.version &&
		strictObject(m["io.modelcontextprotocol/clientInfo"], &info) && info.Name != "" && info.Version != "" &&
		json.Unmarshal(m["io.modelcontextprotocol/clientCapabilities"], &caps) == nil && caps != nil && len(caps) == 0
}

// plainID reports whether raw is a request ID that the SDK would echo as
// it is: a whole number of up to 18 digits, or a string that JSON writes
// back the same. No ID (a notification) and null are not.
func plainID(raw json.RawMessage) bool {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return false
		}
		again, _ := json.Marshal(s)
		return bytes.Equal(again, raw)
	}
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// strictObject decodes raw into v, refusing fields v does not have.
func strictObject(raw json.RawMessage, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return len(raw) > 0 && raw[0] == '{' && dec.Decode(v) == nil
}

// acceptsBoth reports whether an Accept header names both JSON and event
// streams, as the SDK wants of a POST.
func acceptsBoth(values []string) bool {
	var js, sse bool
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			t, _, _ = strings.Cut(strings.TrimSpace(t), ";")
			switch strings.ToLower(strings.TrimSpace(t)) {
			case "application/json":
				js = true
			case "text/event-stream":
				sse = true
			}
		}
	}
	return js && sse
}

// rebinding reports whether r came to a loopback address with a Host
// that is not a loopback one: the SDK refuses those (DNS rebinding), so
// they are left to it.
func rebinding(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return true
	}
	return loopback(local.String()) && !loopback(r.Host)
}

func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
