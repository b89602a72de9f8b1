package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// SkippedTool is a tool of a server that is not offered, and why.
type SkippedTool struct {
	// Name is the tool's name on the server.
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// validName is the providers' function name rule (as in package tools).
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolList gathers a server's tools as its tools/list pages arrive: each
// is checked and kept as the tools registry will run it, so that a page is
// not held once it was read, and a tool that cannot be offered is kept
// only as its name and the reason.
type toolList struct {
	s       *server
	rcfg    tools.Config
	ok      []tools.Tool
	skipped []SkippedTool
	seen    map[string]bool
}

func (s *server) newToolList() *toolList {
	return &toolList{s: s, rcfg: tools.Config{Timeout: s.m.cfg.Timeout, Logger: s.m.cfg.Logger}, seen: map[string]bool{}}
}

// add checks one listed tool.
func (l *toolList) add(t *sdk.Tool) {
	s := l.s
	name := mcpconfig.ToolName(s.name, t.Name)
	switch {
	case !validName.MatchString(name):
		l.skip(t.Name, fmt.Sprintf("%q breaks the providers' tool name rule ^[a-zA-Z0-9_-]{1,64}$", name))
		return
	case l.seen[name]:
		l.skip(t.Name, "the server lists this name twice")
		return
	}
	l.seen[name] = true
	tooHeavy := func(n int) {
		l.skip(t.Name, fmt.Sprintf("its inputSchema and description are %s, over the limit of %s per tool (MCP_MAX_SCHEMA_BYTES): they would be sent with every model request",
			tools.FormatBytes(n), tools.FormatBytes(s.m.cfg.MaxSchemaBytes)))
	}
	s.mu.Lock()
	n, heavy := s.oversize[t.Name]
	s.mu.Unlock()
	if heavy {
		tooHeavy(n) // its schema never reached the SDK (lightReader)
		return
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		l.skip(t.Name, "no usable inputSchema")
		return
	}
	if n := len(schema) + len(t.Description); n > s.m.cfg.MaxSchemaBytes {
		tooHeavy(n)
		return
	}
	desc := t.Description
	if strings.TrimSpace(desc) == "" {
		// The registry needs a description (the model chooses tools by
		// it); a server may leave it out.
		desc = t.Title
		if desc == "" && t.Annotations != nil {
			desc = t.Annotations.Title
		}
		if strings.TrimSpace(desc) == "" {
			desc = fmt.Sprintf("The %s tool of the %s MCP server.", t.Name, s.name)
		}
	}
	tool := &mcpTool{srv: s, name: t.Name, spec: chat.ToolSpec{Name: name, Description: desc, Parameters: schema},
		idempotent: t.Annotations != nil && (t.Annotations.ReadOnlyHint || t.Annotations.IdempotentHint)}
	if _, err := tools.NewRegistryWithConfig(l.rcfg, tool); err != nil {
		reason := err.Error()
		if _, after, found := strings.Cut(reason, fmt.Sprintf("tool %q: ", name)); found {
			reason = after
		}
		l.skip(t.Name, reason)
		return
	}
	l.ok = append(l.ok, tool)
}

// skip records a tool that is not offered. The name is the server's, and
// bounded: a server may send anything.
func (l *toolList) skip(name, reason string) {
	if len(name) > 128 {
		name = strings.ToValidUTF8(name[:128], "") + "…"
	}
	l.skipped = append(l.skipped, SkippedTool{name, reason})
}

// registry is the registry of the tools that can be offered.
func (l *toolList) registry() *tools.Registry {
	reg, err := tools.NewRegistryWithConfig(l.rcfg, l.ok...)
	if err != nil {
		// Every tool passed alone and names are unique: cannot happen.
		panic(fmt.Sprintf("mcp: building the registry of %q: %v", l.s.name, err))
	}
	return reg
}

// mcpTool is one tool of one server, as the tools registry runs it.
type mcpTool struct {
	srv  *server
	name string // on the server
	spec chat.ToolSpec
	// idempotent: the server says so (annotations readOnlyHint or
	// idempotentHint); MCP's defaults say neither.
	idempotent bool
}

func (t *mcpTool) Spec() chat.ToolSpec { return t.spec }

// Idempotent implements tools.Idempotent.
func (t *mcpTool) Idempotent() bool { return t.idempotent }

// Call calls the tool on the server's live session with the turn's context
// (cancelled at the tool timeout; the SDK then sends
// notifications/cancelled). A server that died during the call gives an
// error, and its restart starts at once.
func (t *mcpTool) Call(ctx context.Context, args json.RawMessage) (tools.Result, error) {
	sess, _, why := t.srv.current()
	if sess == nil {
		return tools.Result{}, errors.New(why)
	}
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: t.name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return tools.Result{}, fmt.Errorf("%w", ctx.Err())
		}
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return tools.Result{}, fmt.Errorf("the MCP server answered with error %d: %s", rpc.Code, rpc.Message)
		}
		t.srv.lost(sess)
		return tools.Result{}, fmt.Errorf("the MCP server %q failed during the call (%v); it is being restarted", t.srv.name, err)
	}
	content, typ := render(res, tools.ResultLimit(ctx))
	if res.IsError {
		return tools.Result{}, errors.New(content)
	}
	return tools.Result{Content: content, Type: typ}, nil
}

// render turns a tool result into the text the model reads, within limit
// bytes: the text content as it is; structuredContent as JSON, only when
// it adds to the content (once, when the text already is that JSON, as
// servers usually send it; not at all when it only wraps the text or
// copies the blocks, as the filesystem server's {"content": text} does);
// images, audio
// and resources as a short description of what they are. Every block
// weighs what the server sent, an image's or a resource's data included,
// although the model reads a line about it: blocks are kept in order while
// the result's weight stays within limit, a text block that crosses it is
// cut, and a result over limit ends with the note of tools.LimitResultOf
// giving its whole weight. Nothing over limit is copied. Over stdio a
// block was cut before the SDK read it (cutCall), and its _meta says what
// it weighed.
func render(res *sdk.CallToolResult, limit int) (content, typ string) {
	r := renderer{limit: limit}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			r.text(c.Text, weighed(c.Meta, len(c.Text)))
		case *sdk.ImageContent:
			w := weighed(c.Meta, len(c.Data))
			r.block(fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), w), w)
		case *sdk.AudioContent:
			w := weighed(c.Meta, len(c.Data))
			r.block(fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), w), w)
		case *sdk.ResourceLink:
			d := describeLink(c)
			r.block(d, len(d))
		case *sdk.EmbeddedResource:
			weight := 0
			if c.Resource != nil {
				weight = len(c.Resource.Text) + len(c.Resource.Blob)
			}
			weight = weighed(c.Meta, weight)
			r.block(describeEmbedded(c.Resource, weight), weight)
		default:
			d := fmt.Sprintf("[%T content]", c)
			r.block(d, len(d))
		}
	}
	if res.StructuredContent != nil {
		if structured, err := json.Marshal(res.StructuredContent); err == nil {
			switch {
			case r.size == 0:
				r.text(string(structured), len(structured))
				typ = "json"
			case r.size <= limit && sameJSON(r.b.String(), structured):
				// The text is that JSON: once, as the JSON.
				r = renderer{limit: limit}
				r.text(string(structured), len(structured))
				typ = "json"
			case !addsTo(res.StructuredContent, res.Content):
				// It says what the content says: the model reads it once.
			case r.size <= limit:
				r.text("\n"+string(structured), len(structured)+1)
			default:
				// The text alone is over the limit, and servers send
				// structuredContent as a copy of it: it is not read.
			}
		}
	}
	if r.size > limit {
		return tools.LimitResultOf(r.b.String(), r.size, limit), typ
	}
	return r.b.String(), typ
}

// renderer joins a result's blocks with newlines, keeping at most limit
// bytes of them, and weighs the whole result in size.
type renderer struct {
	b     strings.Builder
	limit int
	size  int
}

// text adds a text block that weighs weight bytes (len(s), or more when
// the stdio connection cut it already): what fits of it is kept.
func (r *renderer) text(s string, weight int) {
	if r.size > 0 {
		r.size++
		if r.b.Len() < r.limit {
			r.b.WriteByte('\n')
		}
	}
	r.size += weight
	if room := r.limit - r.b.Len(); room > 0 {
		r.b.WriteString(s[:min(len(s), room)])
	}
}

// block adds a block the model reads as desc and that weighs weight bytes:
// kept whole while the result's weight stays within the limit.
func (r *renderer) block(desc string, weight int) {
	sep := 0
	if r.size > 0 {
		sep = 1
	}
	r.size += sep + weight
	if r.size <= r.limit && r.b.Len()+sep+len(desc) <= r.limit {
		if sep == 1 {
			r.b.WriteByte('\n')
		}
		r.b.WriteString(desc)
	}
}

// addsTo reports whether structured content holds a value the content
// blocks do not: a string found neither in their text nor among their
// values, or a number or boolean not among their values. Servers often
// wrap their text ({"content": text}) or copy their blocks ({"content":
// [block]}); the model should not read the same thing twice.
func addsTo(structured any, blocks []sdk.Content) bool {
	var text strings.Builder
	known := map[string]bool{}
	for _, c := range blocks {
		if t, ok := c.(*sdk.TextContent); ok {
			text.WriteString(t.Text)
			text.WriteByte('\n')
		}
		raw, err := json.Marshal(c)
		if err != nil {
			return true
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return true
		}
		leaves(v, func(leaf string) { known[leaf] = true })
	}
	// structured comes from the SDK's decoding; a value of Go types is
	// read as its JSON would be.
	raw, err := json.Marshal(structured)
	if err != nil {
		return true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return true
	}
	adds := false
	all := text.String()
	leaves(v, func(leaf string) {
		if known[leaf] {
			return
		}
		var s string
		if json.Unmarshal([]byte(leaf), &s) == nil && strings.Contains(all, strings.TrimSpace(s)) {
			return
		}
		adds = true
	})
	return adds
}

// leaves calls f with the JSON of every string, number and boolean in v.
func leaves(v any, f func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			leaves(x, f)
		}
	case []any:
		for _, x := range t {
			leaves(x, f)
		}
	case nil:
	default:
		b, _ := json.Marshal(t)
		f(string(b))
	}
}

func sameJSON(text string, structured []byte) bool {
	var a, b any
	if json.Unmarshal([]byte(text), &a) != nil || json.Unmarshal(structured, &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func describeLink(l *sdk.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	if l.Name != "" {
		b.WriteString(l.Name + " ")
	}
	b.WriteString("<" + l.URI + ">")
	if l.MIMEType != "" {
		b.WriteString(", " + l.MIMEType)
	}
	if l.Description != "" {
		b.WriteString(": " + l.Description)
	}
	b.WriteString("]")
	return b.String()
}

func describeEmbedded(r *sdk.ResourceContents, size int) string {
	if r == nil {
		return "[resource]"
	}
	return fmt.Sprintf("[resource: <%s>, %s, %d bytes]", r.URI, orUnknown(r.MIMEType), size)
}

// weighed is the weight of a content block whose own data weighs own: what
// its _meta says it weighed (weightKey), when the stdio connection cut its
// data before the SDK read it, and never less than own.
func weighed(meta sdk.Meta, own int) int {
	if w, ok := meta[weightKey].(float64); ok && int(w) > own {
		return int(w)
	}
	return own
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}
