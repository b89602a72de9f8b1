// Package provider puts real model providers behind llmorch.Model: OpenAI
// and every OpenAI-compatible server (vLLM, Ollama, Groq, DeepSeek,
// Cerebras, Gemini's OpenAI endpoint, OpenRouter, ...) through a base URL,
// and Anthropic.
//
// It is built on langchaingo (github.com/tmc/langchaingo v0.1.14), which
// converts the conversation and the tools into each wire format and builds
// the request with its headers. langchaingo's stream parsing is not used:
// it ignores the tool-call delta index (interleaved parallel calls get glued,
// a repeated "type":"function" makes a phantom call, a trailing delta with
// empty arguments makes an empty phantom call), fails on SSE lines over
// 64 KiB, loses Anthropic tool calls from streams, leaks a goroutine after an
// Anthropic error event and sometimes reports success on a deadline. So the
// HTTP client given to langchaingo has a transport that takes the request
// and hands langchaingo a stand-in answer that ends its call at once (a
// status it takes for an error, which is ignored: langchaingo would
// otherwise start its own parser's goroutine); the call then sends the
// request itself and gives the streamed response body to this package's
// own parser, which yields events to the caller as the bytes arrive, in the
// caller's goroutine, with no goroutine per call.
//
// The transport also corrects the request where langchaingo gets it wrong:
// it drops the temperature langchaingo always sends (0) when none was asked
// for, and for Anthropic it merges consecutive messages of one role (which
// the conversion below produces to get every tool_use block past
// langchaingo, which keeps only the first part of an assistant message) and
// marks failed tool results with is_error. Whether a model takes system
// messages is decided once per model here, not by langchaingo on every call
// (capability.go says why and what that changes for other users of
// langchaingo's openai package in the same program).
//
// # Events
//
// Stream yields chat.KindTextDelta events as text arrives, then the tool
// calls, then one chat.KindUsage when the provider reported usage. Every
// tool call is validated: it must have a name, its arguments must be a JSON
// object (empty arguments become {}), and it must have an ID (one is
// generated when the server sent none, or sent one already used in the
// response). A valid call is a chat.KindToolCall event, also when it names a
// tool the request did not offer: refusing it is the orchestration's
// decision, and its refusal tells the model the step, the sequence position
// and the tools it may use. An invalid call is not dropped: it is a
// chat.KindError event whose Error has Code CodeInvalidToolCall and a
// message for the model, and whose ToolCall carries the ID and name (and
// arguments {} when they were not a JSON object), so that the caller can
// record the call and answer it with an error result the model can correct.
// Such an event does not end the stream. A delta sequence that names no tool
// and carries no arguments is a server artefact, not a call, and is ignored.
//
// # Failures
//
// A failure ends the stream with an error value (never an event) that is a
// *chat.Error (errors.As) with one of the Code constants and a message safe
// to show: no API key, no URL, no raw response body. Cancellation and
// deadlines also match context.Canceled / context.DeadlineExceeded
// (errors.Is). Rate limits, 5xx, 529 and connection failures are retried
// with backoff (honouring Retry-After and retry-after-ms) only while nothing
// has been yielded; once output started, a failure is returned as is. A
// stream that goes silent for Config.IdleTimeout is cut and fails with
// CodeTimeout (retried likewise), so that a hung provider cannot hold a turn
// forever.
package provider

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/tokencount"
)

// The providers (wire formats) New accepts.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
)

// Error codes of the *chat.Error values this package returns or yields.
const (
	CodeRateLimited     = "rate_limited"
	CodeUnavailable     = "provider_unavailable"
	CodeAuth            = "provider_auth"
	CodeProviderError   = "provider_error"
	CodeTimeout         = "timeout"
	CodeCancelled       = "cancelled"
	CodeInvalidRequest  = "invalid_request"
	CodeInvalidToolCall = "invalid_tool_call"
	CodeOutputLimit     = "output_limit"
	// CodeContextLength: the provider refused the request as longer than
	// the model's context.
	CodeContextLength = "context_length_exceeded"
)

// Defaults applied by New.
const (
	DefaultMaxRetries          = 2
	DefaultRetryBaseDelay      = 500 * time.Millisecond
	DefaultMaxRetryDelay       = 20 * time.Second
	DefaultHeaderTimeout       = 90 * time.Second
	DefaultIdleTimeout         = 5 * time.Minute
	DefaultAnthropicMaxTokens  = 4096
	maxRetriesLimit            = 10
	anthropicDefaultAPIVersion = "/v1"
)

// Config configures one model. It is validated once, by New.
type Config struct {
	// Provider is OpenAI (any OpenAI-compatible server) or Anthropic.
	Provider string
	// Model is the provider's model name.
	Model string
	// BaseURL overrides the provider's endpoint: for OpenAI-compatible
	// servers the URL that /chat/completions is appended to (e.g.
	// http://localhost:11434/v1); for Anthropic the API root, with or
	// without /v1.
	BaseURL string
	// APIKey may be empty only with a BaseURL (keyless local servers); no
	// auth header is sent then.
	APIKey string
	// Temperature and MaxTokens are defaults for requests that set none.
	// Without a temperature none is sent (the provider's default applies).
	// MaxTokens 0 sends no limit to OpenAI and DefaultAnthropicMaxTokens to
	// Anthropic, which requires one.
	Temperature *float64
	MaxTokens   int
	// LegacyMaxTokensField sends max_tokens instead of
	// max_completion_tokens (OpenAI-compatible servers that predate it).
	LegacyMaxTokensField bool
	// RestrictsTools: the server takes OpenAI's tool_choice
	// {"type":"allowed_tools"} (api.openai.com does; most
	// OpenAI-compatible servers do not, and some reject it). A request
	// that names its offered tools apart (llmorch.Request.Offered) then
	// sends them as allowed_tools, and the model (llmorch.Info) reports
	// that it restricts its calls, which makes stable tool filtering the
	// agent's default. OpenAI wire only.
	RestrictsTools bool
	// HTTPClient is used for the requests (its Transport wrapped); nil
	// uses a client with HeaderTimeout.
	HTTPClient *http.Client
	// MaxRetries is how many times a call is retried before its first
	// output (0: DefaultMaxRetries; negative: never).
	MaxRetries int
	// RetryBaseDelay is the first backoff (doubling, with jitter), and
	// MaxRetryDelay bounds every wait; a Retry-After beyond it is not
	// waited for: the call fails at once.
	RetryBaseDelay time.Duration
	MaxRetryDelay  time.Duration
	// Timeout bounds a whole call, retries and stream included (0: only
	// the caller's context bounds it).
	Timeout time.Duration
	// HeaderTimeout bounds the wait for response headers of one attempt
	// when HTTPClient is nil (0: DefaultHeaderTimeout).
	HeaderTimeout time.Duration
	// IdleTimeout bounds the silence of a streamed answer: from its
	// headers to its first bytes, and between any two reads (0:
	// DefaultIdleTimeout, which leaves room for a reasoning model's long
	// pauses; negative: no bound). A stream cut by it fails with
	// CodeTimeout, and is retried when it had yielded nothing.
	IdleTimeout time.Duration
}

// New validates cfg and returns the model. An OpenAI model whose family
// has a published tokenizer is an llmorch.TokenCounter
// (package tokencount), so that its requests are counted as it counts them.
func New(cfg Config) (llmorch.Model, error) {
	m, err := newModel(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Provider == OpenAI {
		if c, ok := tokencount.ForModel(cfg.Model); ok {
			return countingModel{m, c}, nil
		}
	}
	return m, nil
}

// countingModel is a model with its tokenizer.
type countingModel struct {
	*model
	*tokencount.Counter
}

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Provider {
	case OpenAI, Anthropic:
	case "":
		bad("Provider is empty (want %q or %q)", OpenAI, Anthropic)
	default:
		bad("Provider %q is not supported (want %q or %q; OpenAI-compatible servers use %q with a BaseURL)", c.Provider, OpenAI, Anthropic, OpenAI)
	}
	if strings.TrimSpace(c.Model) == "" {
		bad("Model is empty")
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		switch {
		case err != nil:
			bad("BaseURL is not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			bad("BaseURL must start with http:// or https://")
		case u.Host == "":
			bad("BaseURL has no host")
		}
	}
	if c.APIKey == "" && c.BaseURL == "" {
		bad("APIKey is empty (only keyless servers at a BaseURL may omit it)")
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		bad("APIKey contains a line break")
	}
	if c.Temperature != nil {
		limit := 2.0
		if c.Provider == Anthropic {
			limit = 1.0
		}
		if t := *c.Temperature; t < 0 || t > limit || t != t {
			bad("Temperature %v is outside [0, %v]", t, limit)
		}
	}
	if c.MaxTokens < 0 {
		bad("MaxTokens %d is negative", c.MaxTokens)
	}
	if c.LegacyMaxTokensField && c.Provider == Anthropic {
		bad("LegacyMaxTokensField applies to OpenAI-compatible servers only")
	}
	if c.RestrictsTools && c.Provider == Anthropic {
		bad("RestrictsTools applies to OpenAI-compatible servers only (Anthropic has no allowed_tools)")
	}
	if c.MaxRetries > maxRetriesLimit {
		bad("MaxRetries %d is over %d", c.MaxRetries, maxRetriesLimit)
	}
	for name, d := range map[string]time.Duration{"RetryBaseDelay": c.RetryBaseDelay, "MaxRetryDelay": c.MaxRetryDelay,
		"Timeout": c.Timeout, "HeaderTimeout": c.HeaderTimeout} {
		if d < 0 {
			bad("%s %v is negative", name, d)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("provider: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// model is one configured provider and model.
type model struct {
	cfg  Config
	llm  llms.Model
	info llmorch.Info
	// foldSystem: the model takes no system messages (capability.go), so
	// the system text goes into the first user message.
	foldSystem bool
	// sleep waits between retries; tests replace it to observe the waits.
	sleep func(ctxDone <-chan struct{}, d time.Duration) bool
}

func newModel(cfg Config) (*model, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if cfg.MaxRetryDelay == 0 {
		cfg.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.HeaderTimeout == 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.Provider == Anthropic && cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultAnthropicMaxTokens
	}

	tr := &transport{wire: cfg.Provider, keyless: cfg.APIKey == ""}
	client := &http.Client{}
	if cfg.HTTPClient != nil {
		*client = *cfg.HTTPClient
		tr.base = cfg.HTTPClient.Transport
	}
	if tr.base == nil {
		tr.base = defaultTransport(cfg.HeaderTimeout)
	}
	client.Transport = tr

	// langchaingo refuses an empty key; a keyless server gets a placeholder
	// that the transport removes again.
	key := cfg.APIKey
	if key == "" {
		key = "keyless"
	}
	// Both wires take images and files in a user message's content;
	// OpenAI's takes an answer's format in response_format, Anthropic's
	// reads it in the call's note.
	info := llmorch.Info{Provider: cfg.Provider, Model: cfg.Model, RestrictsTools: cfg.RestrictsTools, Images: true, Files: true, Formats: cfg.Provider == OpenAI}
	m := &model{cfg: cfg, info: info, sleep: sleepCtx,
		foldSystem: cfg.Provider == OpenAI && !takesSystem(cfg.Model)}
	var err error
	switch cfg.Provider {
	case OpenAI:
		// An explicit empty organization keeps langchaingo from sending
		// OPENAI_ORGANIZATION from the environment to other vendors.
		opts := []openai.Option{openai.WithToken(key), openai.WithModel(cfg.Model), openai.WithHTTPClient(client), openai.WithOrganization("")}
		if cfg.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/")))
		} else {
			// langchaingo would read OPENAI_BASE_URL itself; the caller's
			// config is the only source here.
			opts = append(opts, openai.WithBaseURL("https://api.openai.com/v1"))
		}
		m.llm, err = openai.New(opts...)
	case Anthropic:
		opts := []anthropic.Option{anthropic.WithToken(key), anthropic.WithModel(cfg.Model), anthropic.WithHTTPClient(client)}
		if cfg.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(anthropicBase(cfg.BaseURL)))
		}
		m.llm, err = anthropic.New(opts...)
	}
	if err != nil {
		// langchaingo's construction errors name no secrets, but keep the
		// message ours anyway.
		return nil, fmt.Errorf("provider: creating the %s client failed", cfg.Provider)
	}
	return m, nil
}

// anthropicBase appends /v1 to an Anthropic API root: the Anthropic SDKs
// take ANTHROPIC_BASE_URL without it, langchaingo wants it.
func anthropicBase(base string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, anthropicDefaultAPIVersion) {
		return base
	}
	return base + anthropicDefaultAPIVersion
}

func defaultTransport(headerTimeout time.Duration) http.RoundTripper {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		ExpectContinueTimeout: time.Second,
	}
}

// Info names the provider and model.
func (m *model) Info() llmorch.Info { return m.info }

func sleepCtx(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
