// Package mcpconfig reads the configuration of MCP servers in the shape every
// MCP client uses (Claude Desktop, Cursor, VS Code, the MCP Inspector):
//
//	{"mcpServers": {
//	  "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"], "env": {"DEBUG": "1"}, "cwd": "/srv"},
//	  "github": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}
//	}}
//
// A server with a command runs as a child process spoken to over stdio; a
// server with a url is reached over the streamable HTTP transport. The same
// shape is read from MCP_SERVERS_FILE (servers for every agent) and from a
// template's own "mcpServers" field (servers for that template only).
//
// Check reports every problem of the static shape, each naming the server
// and the field; Expand substitutes ${VAR} and ${VAR:-default} in env
// values, header values and the url from the environment when a server is
// started, so that secrets stay out of templates and files. The package has
// no dependency on the MCP SDK, so that the template package can validate
// templates without it.
package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Server is one entry of "mcpServers": a command (stdio) or a url
// (streamable HTTP).
type Server struct {
	// Type is optional: "stdio", or "http" (also written "streamable-http"
	// or "streamableHttp"), as some clients write it. Without it the
	// transport follows from command or url.
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Cwd is the child's working directory; a relative one is taken from
	// the directory of the file that declares the server.
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// Extra keeps the fields this runtime does not know, so that Check can
	// name them and a template survives a round trip unchanged.
	Extra map[string]json.RawMessage `json:"-"`
}

// Transport returns TransportStdio or TransportHTTP ("" when the server has
// neither a command nor a url).
func (s Server) Transport() string {
	switch strings.ToLower(s.Type) {
	case "stdio":
		return TransportStdio
	case "http", "streamable-http", "streamablehttp":
		return TransportHTTP
	}
	switch {
	case s.Command != "":
		return TransportStdio
	case s.URL != "":
		return TransportHTTP
	}
	return ""
}

var knownFields = []string{"type", "command", "args", "env", "cwd", "url", "headers"}

// UnmarshalJSON decodes a server and keeps unknown fields in Extra.
func (s *Server) UnmarshalJSON(b []byte) error {
	type plain Server
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	p.Extra = nil
	for k, v := range all {
		if !slices.Contains(knownFields, k) {
			if p.Extra == nil {
				p.Extra = map[string]json.RawMessage{}
			}
			p.Extra[k] = v
		}
	}
	*s = Server(p)
	return nil
}

// MarshalJSON encodes a server with its unknown fields.
func (s Server) MarshalJSON() ([]byte, error) {
	type plain Server
	b, err := json.Marshal(plain(s))
	if err != nil || len(s.Extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range s.Extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// Servers maps server names to servers.
type Servers map[string]Server

// Names returns the server names, sorted.
func (ss Servers) Names() []string {
	names := make([]string, 0, len(ss))
	for n := range ss {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Problem is one thing wrong in a configuration, located by its path (for
// example `mcpServers.github.url`).
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// Problems is a list of problems; as an error it lists them one per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err returns ps as an error, or nil when there are none.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// nameRule is the server name rule: letters, digits, '-' and single '_'
// between them, so that "<server>__<tool>" splits at its first "__" back
// into the server and the tool.
var nameRule = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// MaxNameLength bounds a server name, leaving room for tool names within
// the providers' 64 characters.
const MaxNameLength = 32

// Separator joins a server's name and its tool's name into the tool name
// the model sees.
const Separator = "__"

// ToolName returns the name the model sees for tool of server.
func ToolName(server, tool string) string { return server + Separator + tool }

// SplitToolName returns the server and the tool of a name made by ToolName;
// ok is false for a name without the separator.
func SplitToolName(name string) (server, tool string, ok bool) {
	return strings.Cut(name, Separator)
}

// CheckName reports what is wrong with a server name, or "".
func CheckName(name string) string {
	switch {
	case name == "":
		return "a server needs a name"
	case len(name) > MaxNameLength:
		return fmt.Sprintf("the name is %d characters long; at most %d, so that its tools' names fit the providers' 64", len(name), MaxNameLength)
	case !nameRule.MatchString(name):
		return "a name has letters, digits, '-' and single '_' between them (no \"__\", which separates the server from the tool in tool names)"
	}
	return ""
}

// Check reports every problem of servers' static shape: names, unknown
// fields, the transport's fields (a command or a url, not both), a url that
// is not http(s) (unless it is made by ${VAR}), empty keys. prefix starts
// every path ("mcpServers" in a file or a template).
func Check(servers Servers, prefix string) Problems {
	var ps Problems
	for _, name := range servers.Names() {
		s := servers[name]
		at := func(field string) string {
			p := prefix + "." + name
			if field != "" {
				p += "." + field
			}
			return p
		}
		add := func(field, format string, args ...any) {
			ps = append(ps, Problem{Path: at(field), Message: fmt.Sprintf(format, args...)})
		}
		if msg := CheckName(name); msg != "" {
			add("", "%s", msg)
		}
		for _, k := range sortedKeys(s.Extra) {
			add(k, "unknown field (known: %s)", strings.Join(knownFields, ", "))
		}
		switch strings.ToLower(s.Type) {
		case "", "stdio", "http", "streamable-http", "streamablehttp":
		case "sse":
			add("type", "the legacy SSE transport is not supported; use the server's streamable HTTP endpoint (a url) or its stdio command")
		default:
			add("type", "unknown transport %q (known: stdio, http)", s.Type)
		}
		switch {
		case s.Command != "" && s.URL != "":
			add("", "has both a command (stdio) and a url (streamable HTTP); keep one")
			continue
		case s.Command == "" && s.URL == "":
			if s.Transport() == TransportHTTP {
				add("url", "required: the server's streamable HTTP endpoint, such as https://host/mcp")
			} else {
				add("command", "required: the command that starts the server (stdio), or give a url (streamable HTTP) instead")
			}
			continue
		}
		switch s.Transport() {
		case TransportStdio:
			if s.Command == "" {
				add("command", "required with type %q", s.Type)
			}
			if strings.TrimSpace(s.Command) != s.Command {
				add("command", "has leading or trailing spaces; put arguments in args")
			}
			if s.URL != "" || len(s.Headers) > 0 {
				add("headers", "only for a url (streamable HTTP)")
			}
			for _, k := range sortedKeys(s.Env) {
				if k == "" || strings.ContainsAny(k, "=\x00") {
					add("env", "invalid variable name %q", k)
				}
			}
		case TransportHTTP:
			if s.URL == "" {
				add("url", "required with type %q", s.Type)
				continue
			}
			if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
				add("", "args, env and cwd are only for a command (stdio)")
			}
			if !strings.Contains(s.URL, "${") {
				if msg := checkURL(s.URL); msg != "" {
					add("url", "%s", msg)
				}
			}
			for _, k := range sortedKeys(s.Headers) {
				if !validHeaderName(k) {
					add("headers", "invalid header name %q", k)
				}
			}
		}
	}
	return ps
}

func checkURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL: %v", raw, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q: want an http:// or https:// URL", raw)
	case u.Host == "":
		return fmt.Sprintf("%q has no host", raw)
	}
	return ""
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// File is an MCP servers file: {"mcpServers": {...}}.
type File struct {
	Servers Servers `json:"mcpServers"`
}

// Parse decodes an MCP servers file and checks it. name locates problems
// (the file's path); relative cwd values are resolved against its directory.
func Parse(name string, data []byte) (Servers, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %w", name, err)
	}
	var ps Problems
	for _, k := range sortedKeys(top) {
		if k != "mcpServers" {
			ps = append(ps, Problem{Path: name + ": " + k, Message: `unknown field (an MCP servers file has only "mcpServers")`})
		}
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, fmt.Errorf(`%s: no "mcpServers" object`, name)
	}
	var servers Servers
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&servers); err != nil {
		return nil, fmt.Errorf("%s: mcpServers: %w", name, err)
	}
	ps = append(ps, Check(servers, name+": mcpServers")...)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return servers.Resolve(filepath.Dir(name)), nil
}

// ReadFile reads and parses an MCP servers file.
func ReadFile(path string) (Servers, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Resolve returns servers with relative paths made absolute against dir,
// the directory of the file that declares them (nothing changes when dir
// is ""): a relative cwd always; and, for a command without a cwd, each
// argument that is a relative path naming a file or directory that exists
// under dir ("./workspace", "server/index.js"). Other arguments ("-y", a
// package name, a path that exists nowhere under dir) pass unchanged, and
// so resolve against the runtime's working directory as before.
func (ss Servers) Resolve(dir string) Servers {
	if dir == "" {
		return ss
	}
	out := make(Servers, len(ss))
	for n, s := range ss {
		if s.Cwd == "" && len(s.Args) > 0 {
			s.Args = slices.Clone(s.Args)
			for i, a := range s.Args {
				if a == "" || strings.HasPrefix(a, "-") || filepath.IsAbs(a) {
					continue
				}
				if p := filepath.Join(dir, a); exists(p) {
					s.Args[i] = p
				}
			}
		}
		if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
			s.Cwd = filepath.Join(dir, s.Cwd)
		}
		out[n] = s
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Expand returns s with ${VAR} and ${VAR:-default} in env values, header
// values and the url replaced from lookup (os.LookupEnv in the runtime). A
// variable that is not set and has no default is a problem naming the
// field; so is a url that is not http(s) after expansion. A '$' not
// followed by '{' is kept as it is.
func Expand(name string, s Server, lookup func(string) (string, bool)) (Server, Problems) {
	var ps Problems
	at := "mcpServers." + name + "."
	expand := func(field, v string) string {
		out, missing := expandVars(v, lookup)
		for _, m := range missing {
			ps = append(ps, Problem{Path: at + field, Message: fmt.Sprintf("${%s} is not set in the server's environment (write ${%s:-default} for a default)", m, m)})
		}
		return out
	}
	if len(s.Env) > 0 {
		env := make(map[string]string, len(s.Env))
		for _, k := range sortedKeys(s.Env) {
			env[k] = expand("env."+k, s.Env[k])
		}
		s.Env = env
	}
	if len(s.Headers) > 0 {
		h := make(map[string]string, len(s.Headers))
		for _, k := range sortedKeys(s.Headers) {
			h[k] = expand("headers."+k, s.Headers[k])
		}
		s.Headers = h
	}
	if s.URL != "" {
		s.URL = expand("url", s.URL)
		if len(ps) == 0 {
			if msg := checkURL(s.URL); msg != "" {
				ps = append(ps, Problem{Path: at + "url", Message: "after ${VAR} expansion: " + msg})
			}
		}
	}
	return s, ps
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

func expandVars(v string, lookup func(string) (string, bool)) (string, []string) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(v, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		if val, ok := lookup(m[1]); ok && (val != "" || m[2] == "") {
			return val
		}
		if m[2] != "" {
			return m[3]
		}
		if !slices.Contains(missing, m[1]) {
			missing = append(missing, m[1])
		}
		return ""
	})
	return out, missing
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
