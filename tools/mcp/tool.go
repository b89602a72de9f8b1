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

// buildTools turns a server's tool list into a registry of the tools that
// can be offered, and the ones that cannot with the reason.
func (s *server) buildTools(list []*sdk.Tool) (*tools.Registry, []SkippedTool) {
	rcfg := tools.Config{Timeout: s.m.cfg.Timeout, Logger: s.m.cfg.Logger}
	var (
		ok      []tools.Tool
		skipped []SkippedTool
		seen    = map[string]bool{}
	)
	for _, t := range list {
		name := mcpconfig.ToolName(s.name, t.Name)
		switch {
		case !validName.MatchString(name):
			skipped = append(skipped, SkippedTool{t.Name, fmt.Sprintf("%q breaks the providers' tool name rule ^[a-zA-Z0-9_-]{1,64}$", name)})
			continue
		case seen[name]:
			skipped = append(skipped, SkippedTool{t.Name, "the server lists this name twice"})
			continue
		}
		seen[name] = true
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			skipped = append(skipped, SkippedTool{t.Name, "no usable inputSchema"})
			continue
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
		if _, err := tools.NewRegistryWithConfig(rcfg, tool); err != nil {
			reason := err.Error()
			if _, after, found := strings.Cut(reason, fmt.Sprintf("tool %q: ", name)); found {
				reason = after
			}
			skipped = append(skipped, SkippedTool{t.Name, reason})
			continue
		}
		ok = append(ok, tool)
	}
	reg, err := tools.NewRegistryWithConfig(rcfg, ok...)
	if err != nil {
		// Every tool passed alone and names are unique: cannot happen.
		panic(fmt.Sprintf("mcp: building the registry of %q: %v", s.name, err))
	}
	return reg, skipped
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
	content, typ := render(res)
	if res.IsError {
		return tools.Result{}, errors.New(content)
	}
	return tools.Result{Content: content, Type: typ}, nil
}

// render turns a tool result into the text the model reads: the text
// content as it is; structuredContent as JSON (once, when the text already
// is that JSON, as servers usually send it); images, audio and resources as
// a short description of what they are.
func render(res *sdk.CallToolResult) (content, typ string) {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, describeLink(c))
		case *sdk.EmbeddedResource:
			parts = append(parts, describeEmbedded(c.Resource))
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	text := strings.Join(parts, "\n")
	if res.StructuredContent == nil {
		return text, ""
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return text, ""
	}
	if text == "" || sameJSON(text, structured) {
		return string(structured), "json"
	}
	return text + "\n\n" + string(structured), ""
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

func describeEmbedded(r *sdk.ResourceContents) string {
	if r == nil {
		return "[resource]"
	}
	size := len(r.Blob)
	if r.Text != "" {
		size = len(r.Text)
	}
	return fmt.Sprintf("[resource: <%s>, %s, %d bytes]", r.URI, orUnknown(r.MIMEType), size)
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}
