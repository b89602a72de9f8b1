package mcpconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // substrings of the error, one per problem; none: valid
	}{
		{"stdio and http", `{"mcpServers": {
			"files": {"command": "node", "args": ["server.js", "/tmp"], "env": {"A": "1"}, "cwd": "work"},
			"remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
			"typed": {"type": "streamable-http", "url": "http://127.0.0.1:3001/mcp"}}}`, nil},
		{"url from a variable is checked later", `{"mcpServers": {"r": {"url": "${MCP_URL}"}}}`, nil},
		{"unknown field", `{"mcpServers": {"files": {"command": "node", "arg": ["x"]}}}`,
			[]string{"cfg.json: mcpServers.files.arg: unknown field (known: type, command, args, env, cwd, url, headers)"}},
		{"missing command or url", `{"mcpServers": {"empty": {}}}`,
			[]string{"mcpServers.empty.command: required: the command that starts the server (stdio), or give a url"}},
		{"http without url", `{"mcpServers": {"h": {"type": "http"}}}`,
			[]string{"mcpServers.h.url: required: the server's streamable HTTP endpoint"}},
		{"both", `{"mcpServers": {"both": {"command": "x", "url": "http://h/mcp"}}}`,
			[]string{"mcpServers.both: has both a command (stdio) and a url (streamable HTTP); keep one"}},
		{"bad url", `{"mcpServers": {"u": {"url": "ftp://host/mcp"}, "v": {"url": "http:///mcp"}, "w": {"url": "http://h o/"}}}`,
			[]string{`mcpServers.u.url: "ftp://host/mcp": want an http:// or https:// URL`, `mcpServers.v.url: "http:///mcp" has no host`, `mcpServers.w.url: "http://h o/" is not a URL`}},
		{"sse", `{"mcpServers": {"old": {"type": "sse", "url": "http://h/sse"}}}`,
			[]string{"mcpServers.old.type: the legacy SSE transport is not supported"}},
		{"bad names", `{"mcpServers": {"a__b": {"command": "x"}, "_a": {"command": "x"}, "a.b": {"command": "x"}}}`,
			[]string{`mcpServers._a: a name has letters`, `mcpServers.a.b: a name has letters`, `mcpServers.a__b: a name has letters`}},
		{"stdio fields on http", `{"mcpServers": {"h": {"url": "http://h/mcp", "env": {"A": "1"}}}}`,
			[]string{"mcpServers.h: args, env and cwd are only for a command (stdio)"}},
		{"headers on stdio", `{"mcpServers": {"s": {"command": "x", "headers": {"A": "1"}}}}`,
			[]string{"mcpServers.s.headers: only for a url (streamable HTTP)"}},
		{"bad header", `{"mcpServers": {"h": {"url": "http://h/mcp", "headers": {"Bad Name": "1"}}}}`,
			[]string{`mcpServers.h.headers: invalid header name "Bad Name"`}},
		{"top-level field", `{"mcpServers": {}, "servers": {}}`, []string{`cfg.json: servers: unknown field`}},
		{"no mcpServers", `{}`, []string{`cfg.json: no "mcpServers" object`}},
		{"wrong type", `{"mcpServers": {"s": {"command": "x", "args": "y"}}}`, []string{`cfg.json: mcpServers: json: cannot unmarshal`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers, err := Parse("cfg.json", []byte(tt.file))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if s, ok := servers["files"]; ok && s.Cwd != "work" {
					t.Errorf("cwd %q: a relative cwd is resolved against the file's directory (.)", s.Cwd)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestResolveCwd(t *testing.T) {
	servers, err := Parse(filepath.Join("/etc", "agentdock", "mcp.json"), []byte(`{"mcpServers": {"a": {"command": "x", "cwd": "data"}, "b": {"command": "x", "cwd": "/abs"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := servers["a"].Cwd; got != "/etc/agentdock/data" {
		t.Errorf("relative cwd = %q", got)
	}
	if got := servers["b"].Cwd; got != "/abs" {
		t.Errorf("absolute cwd = %q", got)
	}
}

// TestResolveArgs: a command's relative arguments that name a path under
// the declaring file's directory become absolute; flags, package names,
// paths that exist nowhere there, and the arguments of a server with a cwd
// (relative to that cwd) pass unchanged.
func TestResolveArgs(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "server"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server", "index.js"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   Server
		want []string
	}{
		{"npx with a directory", Server{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "./workspace"}},
			[]string{"-y", "@modelcontextprotocol/server-filesystem", filepath.Join(dir, "workspace")}},
		{"a script without ./", Server{Command: "node", Args: []string{"server/index.js", "stdio"}},
			[]string{filepath.Join(dir, "server/index.js"), "stdio"}},
		{"absent and absolute paths", Server{Command: "node", Args: []string{"./missing", "/abs/path", "--root=./workspace", ""}},
			[]string{"./missing", "/abs/path", "--root=./workspace", ""}},
		{"with a cwd the arguments are the cwd's", Server{Command: "node", Args: []string{"./workspace"}, Cwd: "server"},
			[]string{"./workspace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in.Args)
			got := Servers{"s": tt.in}.Resolve(dir)["s"]
			if !slices.Equal(got.Args, tt.want) {
				t.Errorf("args = %q, want %q", got.Args, tt.want)
			}
			if !slices.Equal(tt.in.Args, in) {
				t.Errorf("Resolve changed its input: %q", tt.in.Args)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret", "HOST": "mcp.example.com", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s := Server{
		URL:     "https://${HOST}/mcp?x=$notavar",
		Headers: map[string]string{"Authorization": "Bearer ${TOKEN}", "X-Region": "${REGION:-eu}", "X-Empty": "${EMPTY:-fallback}", "X-Set-Empty": "[${EMPTY}]"},
	}
	got, ps := Expand("remote", s, lookup)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if got.URL != "https://mcp.example.com/mcp?x=$notavar" {
		t.Errorf("url = %q", got.URL)
	}
	want := map[string]string{"Authorization": "Bearer s3cret", "X-Region": "eu", "X-Empty": "fallback", "X-Set-Empty": "[]"}
	for k, v := range want {
		if got.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, got.Headers[k], v)
		}
	}
	if s.Headers["Authorization"] != "Bearer ${TOKEN}" {
		t.Error("Expand modified its argument")
	}

	_, ps = Expand("files", Server{Command: "x", Env: map[string]string{"KEY": "${MISSING}", "B": "${MISSING} ${OTHER}"}}, lookup)
	if len(ps) != 3 || ps[0].String() != "mcpServers.files.env.B: ${MISSING} is not set in the server's environment (write ${MISSING:-default} for a default)" ||
		ps[1].Path != "mcpServers.files.env.B" || ps[2].Path != "mcpServers.files.env.KEY" {
		t.Errorf("problems = %v", ps)
	}
	_, ps = Expand("r", Server{URL: "${HOST}"}, lookup)
	if len(ps) != 1 || !strings.Contains(ps[0].String(), `mcpServers.r.url: after ${VAR} expansion: "mcp.example.com": want an http:// or https:// URL`) {
		t.Errorf("problems = %v", ps)
	}
}

func TestRoundTrip(t *testing.T) {
	in := `{"command":"node","future":{"x":1}}`
	var s Server
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip: %s", out)
	}
}

func TestToolName(t *testing.T) {
	name := ToolName("github", "create_issue")
	if name != "github__create_issue" {
		t.Fatal(name)
	}
	srv, tool, ok := SplitToolName("my_srv__do__it")
	if !ok || srv != "my_srv" || tool != "do__it" {
		t.Errorf("split = %q %q %v", srv, tool, ok)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"mcpServers": {"a": {"command": "x", "args": ["y"], "env": {"K": "${V:-d}"}}}}`))
	f.Add([]byte(`{"mcpServers": {"b": {"url": "https://h/mcp", "headers": {"A": "b"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, err := Parse("f.json", data)
		if err != nil {
			return
		}
		for name, s := range servers {
			if CheckName(name) != "" || s.Transport() == "" {
				t.Fatalf("accepted server %q: %+v", name, s)
			}
			Expand(name, s, func(string) (string, bool) { return "", false })
		}
	})
}
