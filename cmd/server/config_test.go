package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// testConfigEnv reads the real environment (the packages' validators do)
// and exports a file's variables through t.Setenv, so they are undone.
func testConfigEnv(t *testing.T) configEnv {
	return configEnv{
		lookup:   os.LookupEnv,
		setenv:   func(k, v string) error { t.Setenv(k, v); return nil },
		readFile: os.ReadFile,
	}
}

// clearConfigEnv unsets every variable the configuration reads, so the
// machine's environment cannot change a test's outcome; search goes to
// the package's fake Wikipedia (TestMain), never the network.
func clearConfigEnv(t *testing.T) {
	for _, s := range settings() {
		t.Setenv(s.env, "")
		os.Unsetenv(s.env)
	}
	for _, k := range append(printedEnv, configFileEnv) {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("WIKIPEDIA_URL", wikipedia.URL)
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrecedence: flags over environment over file over defaults,
// and the file's other variables reach the environment.
func TestConfigPrecedence(t *testing.T) {
	clearConfigEnv(t)
	file := writeFile(t, "agentdock.env", `# comment
ADDR=:7001
export HEARTBEAT="5s"
TURN_TIMEOUT='1m'
OPENAI_MODEL=gpt-from-file
API_KEYS=file-key-1, file-key-2
`)
	keys := writeFile(t, "keys", "# ops keys\nkeys-file-key\n\n  file-key-1  \n")
	t.Setenv("HEARTBEAT", "7s")
	t.Setenv("API_KEYS_FILE", keys)
	t.Setenv(configFileEnv, file)
	cfg, err := loadServeConfig([]string{"--turn-timeout", "2m", "--cors-origins", "https://a.example, http://localhost:3000"}, testConfigEnv(t), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
		source    string
	}{
		{"ADDR", cfg.Addr, ":7001", "file"},
		{"HEARTBEAT", cfg.Heartbeat, 7 * time.Second, "env"},
		{"TURN_TIMEOUT", cfg.Budget.TurnTimeout, 2 * time.Minute, "flag"},
		{"SHUTDOWN_TIMEOUT", cfg.ShutdownTimeout, 25 * time.Second, "default"},
		{"MAX_BODY_BYTES", cfg.MaxBodyBytes, int64(1 << 20), "default"},
		{"RATE_LIMIT_RPS", cfg.RateLimitRPS, 0.0, "default"},
	} {
		if c.got != c.want || cfg.sources[c.name] != c.source {
			t.Errorf("%s = %v from %s, want %v from %s", c.name, c.got, cfg.sources[c.name], c.want, c.source)
		}
	}
	if strings.Join(cfg.APIKeys, ",") != "file-key-1,file-key-2,keys-file-key" {
		t.Errorf("API keys %q", cfg.APIKeys)
	}
	if strings.Join(cfg.CORSOrigins, " ") != "https://a.example http://localhost:3000" {
		t.Errorf("CORS origins %q", cfg.CORSOrigins)
	}
	if os.Getenv("OPENAI_MODEL") != "gpt-from-file" {
		t.Error("the file's OPENAI_MODEL did not reach the environment")
	}
	if os.Getenv("HEARTBEAT") != "7s" {
		t.Error("the file overrode the environment")
	}
	// --config beats AGENTDOCK_CONFIG. (The first file's ADDR is in the
	// environment now, which would beat any file.)
	os.Unsetenv("ADDR")
	other := writeFile(t, "other.env", "ADDR=:7002\n")
	if cfg, err = loadServeConfig([]string{"--config", other}, testConfigEnv(t), &bytes.Buffer{}); err != nil || cfg.Addr != ":7002" || cfg.ConfigFile != other {
		t.Fatalf("--config: %v %+v", err, cfg)
	}
}

// TestConfigProblems: every problem is reported at once, each saying which
// setting, where it came from and what is wanted.
func TestConfigProblems(t *testing.T) {
	clearConfigEnv(t)
	t.Setenv("LOG_FORMAT", "xml")
	t.Setenv("HEARTBEAT", "-1s")
	t.Setenv("RATE_LIMIT_RPS", "fast")
	t.Setenv("CORS_ORIGINS", "app.example")
	t.Setenv("API_KEYS_FILE", "/no/such/keys")
	t.Setenv("METRICS_REQUIRE_KEY", "yes please")
	t.Setenv("SESSION_TTL_SECONDS", "-5")
	t.Setenv("OFFLINE_MODEL_DELAY_MS", "slow")
	t.Setenv("API_KEYS", "good-key,bad key")
	t.Setenv("PPROF_ADDR", "0.0.0.0:6060")
	t.Setenv("SESSION_LOCK_TTL", "100ms")
	file := writeFile(t, "bad.env", "ADDR=:1\njust words\n9X=1\nQ='open\nADDR=:2\n")
	_, err := loadServeConfig([]string{"--config", file, "--max-body-bytes", "0", "--store", "bogus://x", "--shutdown-timeout", "soon"}, testConfigEnv(t), &bytes.Buffer{})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"--log-format / LOG_FORMAT (from env): want text or json, got \"xml\"",
		"--heartbeat / HEARTBEAT (from env): want a non-negative Go duration",
		"--rate-limit-rps / RATE_LIMIT_RPS (from env): want a non-negative number, got \"fast\"",
		`CORS origin "app.example"`,
		"/no/such/keys",
		"--metrics-require-key / METRICS_REQUIRE_KEY (from env): want true or false",
		"--max-body-bytes / MAX_BODY_BYTES (from flag)",
		"--store / SESSION_STORE (from flag)",
		"--shutdown-timeout / SHUTDOWN_TIMEOUT (from flag): want a non-negative Go duration such as 30s or 2m, got \"soon\"",
		"SESSION_TTL_SECONDS",
		"OFFLINE_MODEL_DELAY_MS",
		"API key 2 contains a space",
		`--pprof-addr / PPROF_ADDR (from env): "0.0.0.0:6060" is not a loopback address`,
		"--session-lock-ttl / SESSION_LOCK_TTL (from env): must be at least 1s",
		file + ":2: want KEY=VALUE",
		file + `:3: "9X" is not a variable name`,
		file + ":4: Q: the value's quote is not closed",
		file + ":5: ADDR is set twice",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "good-key") {
		t.Errorf("the error shows an API key:\n%v", err)
	}
	if _, err := loadServeConfig([]string{"extra"}, testConfigEnv(t), &bytes.Buffer{}); err == nil {
		t.Error("a stray argument was accepted")
	}
}

// TestLimitSettings: the limits of issue 41 (quotas, the memory store's
// caps, tool results, failed authentications, MCP) have their defaults, a
// quota of 0 turns it off, and a bad value is reported with the others.
func TestLimitSettings(t *testing.T) {
	clearConfigEnv(t)
	cfg, err := loadServeConfig(nil, testConfigEnv(t), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	q := cfg.Quotas
	if q.SessionsPerOwner != 10000 || q.BytesPerOwner != 256<<20 || q.MaxSessions != 100000 || q.MaxBytes != 1<<30 ||
		cfg.Budget.MaxToolResultBytes != 64<<10 || cfg.AuthFailures != 10 || cfg.AuthFailureBurst != 20 {
		t.Fatalf("defaults: quotas %+v, tool results %d, auth failures %g/%d", q, cfg.Budget.MaxToolResultBytes, cfg.AuthFailures, cfg.AuthFailureBurst)
	}
	t.Setenv("SESSIONS_PER_OWNER", "0")
	t.Setenv("BYTES_PER_OWNER", "0")
	t.Setenv("AUTH_FAILURES_PER_MINUTE", "0")
	if cfg, err = loadServeConfig(nil, testConfigEnv(t), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if cfg.Quotas.SessionsPerOwner != -1 || cfg.Quotas.BytesPerOwner != -1 || cfg.AuthFailures != 0 {
		t.Fatalf("0 must turn the quotas and the throttle off: %+v, %g", cfg.Quotas, cfg.AuthFailures)
	}
	t.Setenv("MEMORY_STORE_MAX_BYTES", "0")
	t.Setenv("MEMORY_STORE_MAX_SESSIONS", "-3")
	t.Setenv("MAX_TOOL_RESULT_BYTES", "100")
	t.Setenv("AUTH_FAILURE_BURST", "0")
	t.Setenv("MCP_MAX_TOOLS", "many")
	_, err = loadServeConfig(nil, testConfigEnv(t), &bytes.Buffer{})
	for _, want := range []string{
		"--memory-store-max-bytes / MEMORY_STORE_MAX_BYTES (from env): must be positive",
		"--memory-store-max-sessions / MEMORY_STORE_MAX_SESSIONS (from env): want a positive whole number",
		"--max-tool-result-bytes / MAX_TOOL_RESULT_BYTES (from env): must be at least 1024",
		"--auth-failure-burst / AUTH_FAILURE_BURST (from env): want at least 1",
		`MCP_MAX_TOOLS: want a positive whole number, got "many"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		err      string
	}{
		{"empty", "", map[string]string{}, ""},
		{"comments and blanks", "# a\n\n  # b\nA=1\n", map[string]string{"A": "1"}, ""},
		{"export and spaces", "export  B = two words \n", map[string]string{"B": "two words"}, ""},
		{"quotes", "C=\"x=y # not a comment\"\nD=''\n", map[string]string{"C": "x=y # not a comment", "D": ""}, ""},
		{"value with equals", "REDIS_URL=redis://h:6379/0?dial_timeout=1s\n", map[string]string{"REDIS_URL": "redis://h:6379/0?dial_timeout=1s"}, ""},
		{"crlf", "E=1\r\nF=2\r\n", map[string]string{"E": "1", "F": "2"}, ""},
		{"no equals", "A=1\nnope\n", nil, "f:2: want KEY=VALUE"},
		{"bad name", "A-B=1\n", nil, `f:1: "A-B" is not a variable name`},
		{"unclosed quote", "A=\"x\n", nil, "f:1: A: the value's quote is not closed"},
		{"duplicate", "A=1\nA=2\n", nil, "f:2: A is set twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfigFile([]byte(tc.in), "f")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func FuzzParseConfigFile(f *testing.F) {
	f.Add([]byte("A=1\nexport B='x'\n# c\n"))
	f.Add([]byte("=\n\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseConfigFile(data, "f")
		if err != nil {
			return
		}
		for k := range m {
			if !validEnvName(k) {
				t.Fatalf("accepted name %q", k)
			}
		}
	})
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"OPENAI_API_KEY", "sk-abc", redacted},
		{"ANTHROPIC_API_KEY", "sk-ant", redacted},
		{"API_KEYS", "k1,k2", redacted},
		{"API_KEY_SECRET", "s", redacted},
		{"REDIS_PASSWORD", "hunter2", redacted},
		{"TAVILY_API_KEY", "tvly", redacted},
		{"API_KEYS_FILE", "/run/secrets/keys", "/run/secrets/keys"},
		{"METRICS_REQUIRE_KEY", "true", "true"},
		{"OPENAI_API_KEY", "", ""},
		{"REDIS_URL", "redis://user:hunter2@redis:6379/0", "redis://user:xxxxx@redis:6379/0"},
		{"SESSION_STORE", "rediss://:hunter2@redis:6380/1?dial_timeout=2s", "rediss://:xxxxx@redis:6380/1?dial_timeout=2s"},
		{"SESSION_STORE", "redis+sentinel://u:pw@s1:26379,s2:26379/mymaster/0", "redis+sentinel://u:xxxxx@s1:26379,s2:26379/mymaster/0"},
		{"REDIS_URL", "redis://redis:6379/0", "redis://redis:6379/0"},
		{"SEARXNG_URL", "https://bob:pw@search.example/", "https://bob:xxxxx@search.example/"},
		{"LLM_BASE_URL", "https://proxy.example/v1?api_key=sk-q&x=1", "https://proxy.example/v1?api_key=xxxxx&x=1"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer tok,x-team=a", "authorization=" + redacted + ",x-team=" + redacted},
		{"REDIS_URL", "redis://u:pw@[bad", "[unparsable URL withheld]"},
		{"ADDR", ":8080", ":8080"},
		{"TOKENS_PER_OWNER_PER_DAY", "3000", "3000"},
		{"CONTEXT_MAX_INPUT_TOKENS", "32000", "32000"},
		{"WEBHOOK_SECRET", "whsec", redacted},
		{"LLM_FALLBACK_API_KEY", "sk-fb", redacted},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-key=abc", "x-key=" + redacted},
	} {
		if got := redact(tc.name, tc.in); got != tc.want {
			t.Errorf("redact(%s, %q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestSecretsListed: every setting or printed variable whose name looks
// like a secret's was decided: it is in secretSettings, or reviewed here
// as holding none. The pattern only asks the question; the list answers.
func TestSecretsListed(t *testing.T) {
	notSecret := map[string]string{
		"API_KEYS_FILE":              "a path; the file holds the keys",
		"METRICS_REQUIRE_KEY":        "a boolean",
		"CONTEXT_MAX_INPUT_TOKENS":   "a number of tokens",
		"TOKENS_PER_OWNER_PER_DAY":   "a number of tokens",
		"TOKENS_PER_OWNER_PER_MONTH": "a number of tokens",
	}
	names := slices.Clone(printedEnv)
	for _, s := range settings() {
		names = append(names, s.env)
	}
	looks := regexp.MustCompile(`KEY|SECRET|PASSWORD|TOKEN|CREDENTIAL`)
	for _, n := range names {
		if looks.MatchString(n) && !secretSettings[n] && notSecret[n] == "" {
			t.Errorf("%s looks like a secret: add it to secretSettings, or to this test's notSecret with why it is not", n)
		}
	}
	for n := range secretSettings {
		if !slices.Contains(names, n) {
			t.Errorf("secretSettings lists %s, which is no setting and is not printed", n)
		}
	}
}

// TestConfigPrintoutRedacts: the start-up record names every setting and
// the packages' variables that are set, and shows no secret.
func TestConfigPrintoutRedacts(t *testing.T) {
	clearConfigEnv(t)
	secrets := map[string]string{
		"OPENAI_API_KEY":             "sk-planted-openai-0123456789",
		"ANTHROPIC_API_KEY":          "sk-ant-planted-0123456789",
		"API_KEYS":                   "client-key-planted-1,client-key-planted-2",
		"API_KEY_SECRET":             "fingerprint-secret-planted",
		"REDIS_PASSWORD":             "redis-pass-planted",
		"SESSION_STORE":              "redis://app:store-pass-planted@127.0.0.1:6379/0",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer otlp-token-planted",
		"TAVILY_API_KEY":             "tvly-planted",
		"LLM_FALLBACK_API_KEY":       "sk-fallback-planted",
	}
	t.Setenv("CONTEXT_MAX_INPUT_TOKENS", "12345")
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	cfg, err := loadServeConfig(nil, testConfigEnv(t), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		var h slog.Handler = slog.NewJSONHandler(&buf, nil)
		if format == "text" {
			h = slog.NewTextHandler(&buf, nil)
		}
		slog.New(h).LogAttrs(context.Background(), slog.LevelInfo, "configuration", cfg.attrs(os.LookupEnv, os.Environ())...)
		out := buf.String()
		for _, planted := range []string{"sk-planted-openai", "sk-ant-planted", "client-key-planted", "fingerprint-secret-planted", "redis-pass-planted", "store-pass-planted", "otlp-token-planted", "tvly-planted", "sk-fallback-planted"} {
			if strings.Contains(out, planted) {
				t.Errorf("%s printout shows %s:\n%s", format, planted, out)
			}
		}
		for _, want := range []string{"SHUTDOWN_TIMEOUT", "25s (default)", "OPENAI_API_KEY", "2 keys [redacted]", "redis://app:xxxxx@127.0.0.1:6379/0", "OTEL_EXPORTER_OTLP_HEADERS",
			"12345 (env)", "LLM_FALLBACK_API_KEY"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s printout lacks %q:\n%s", format, want, out)
			}
		}
	}
}

// TestConfigurationDocumented: docs/configuration.md lists every setting
// on a row of its own with its default (a duration in any of its
// spellings), and the limits the packages read themselves with theirs.
func TestConfigurationDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	// row is the table row whose variable column is name.
	row := func(name string) string {
		for _, l := range lines {
			if strings.Contains(l, "| `"+name+"` |") || strings.HasPrefix(l, "| `"+name+"` |") {
				return l
			}
		}
		return ""
	}
	// listed reports whether r gives def in backquotes: the same text, or
	// the same duration.
	listed := func(r, def string) bool {
		if strings.Contains(r, "`"+def+"`") {
			return true
		}
		want, err := time.ParseDuration(def)
		if err != nil {
			return false
		}
		parts := strings.Split(r, "`")
		for i := 1; i < len(parts); i += 2 {
			if d, err := time.ParseDuration(parts[i]); err == nil && d == want {
				return true
			}
		}
		return false
	}
	for _, s := range settings() {
		r := row(s.env)
		switch {
		case r == "":
			t.Errorf("docs/configuration.md has no row for %s", s.env)
		case s.def != "" && !listed(r, s.def):
			t.Errorf("docs/configuration.md: %s is not listed with its default %s: %q", s.env, s.def, r)
		}
	}
	for name, def := range map[string]string{
		"MCP_MAX_TOOLS": "1000", "MCP_MAX_TOOL_PAGES": "100", "MCP_MAX_SCHEMA_BYTES": "65536", "MCP_MAX_AGENT_SCHEMA_BYTES": "262144",
		"SESSION_TTL_SECONDS": "86400", "TOOL_TIMEOUT": "30s", "OFFLINE_MODEL_DELAY_MS": "15",
	} {
		if r := row(name); !listed(r, def) {
			t.Errorf("docs/configuration.md: %s is not listed with its default %s: %q", name, def, r)
		}
	}
}

// TestKeysFileWebhooks: a key of the keys file may carry its own webhook
// secret, hosts and URL; what cannot work is reported by line, never
// naming the key.
func TestKeysFileWebhooks(t *testing.T) {
	clearConfigEnv(t)
	keys := writeFile(t, "keys", "# tenants\nkey-alpha webhook-secret=whsec_c2VjcmV0LWE= webhook-hosts=hooks.alpha.example,10.0.0.9:8443 webhook-url=https://hooks.alpha.example/in\nkey-beta\n")
	t.Setenv("API_KEYS_FILE", keys)
	cfg, err := loadServeConfig(nil, testConfigEnv(t), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.KeyWebhooks["key-alpha"]
	if strings.Join(cfg.APIKeys, ",") != "key-alpha,key-beta" || a.WebhookSecret != "whsec_c2VjcmV0LWE=" || strings.Join(a.WebhookHosts, ",") != "hooks.alpha.example,10.0.0.9:8443" || a.WebhookURL != "https://hooks.alpha.example/in" {
		t.Fatalf("keys %q, alpha's webhooks %+v", cfg.APIKeys, a)
	}
	if _, ok := cfg.KeyWebhooks["key-beta"]; ok {
		t.Error("beta has webhooks of its own")
	}
	for _, tc := range []struct{ line, want string }{
		{"key-x webhook-color=red", `"webhook-color" after the key`},
		{"key-x webhook-hosts=http://h.example", "webhook-hosts"},
		{"key-x webhook-hosts=h.example", "needs webhook-secret"},
		{"key-x webhook-secret=s webhook-hosts=h.example webhook-url=https://other.example/x", "is not on its webhook-hosts"},
		{"key-x webhook-secret=s webhook-hosts=h.example webhook-url=https://h.example:8443/x", "is not on its webhook-hosts"},
	} {
		t.Setenv("API_KEYS_FILE", writeFile(t, "bad-keys", tc.line+"\n"))
		_, err := loadServeConfig(nil, testConfigEnv(t), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "key-x") {
			t.Errorf("%q: %v; want an error saying %q, not naming the key", tc.line, err, tc.want)
		}
	}
}
