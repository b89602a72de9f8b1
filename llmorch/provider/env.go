package provider

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// vendor is a provider name a template may use, and how it is reached.
type vendor struct {
	wire string
	// baseURL is the vendor's OpenAI-compatible endpoint ("" for the wire's
	// own default).
	baseURL string
	// keyEnv lists the environment variables holding its key, first wins.
	keyEnv []string
	// model is used when neither the template nor the environment names one.
	model string
	// keyless marks local servers that need no key, only a base URL.
	keyless bool
	// restricts: the vendor takes tool_choice allowed_tools
	// (Config.RestrictsTools).
	restricts bool
}

// vendors maps the provider names of AgentDock templates (and a few
// local servers) to a wire format. Every vendor but Anthropic speaks the
// OpenAI format at its own base URL with its own key: a vendor's key is never
// sent to another vendor's URL, so OPENAI_API_KEY serves "openai" only.
var vendors = map[string]vendor{
	"openai":     {wire: OpenAI, keyEnv: []string{"OPENAI_API_KEY"}, model: "gpt-4o-mini", restricts: true},
	"anthropic":  {wire: Anthropic, keyEnv: []string{"ANTHROPIC_API_KEY"}, model: "claude-sonnet-4-5"},
	"gemini":     {wire: OpenAI, baseURL: "https://generativelanguage.googleapis.com/v1beta/openai", keyEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, model: "gemini-2.0-flash"},
	"groq":       {wire: OpenAI, baseURL: "https://api.groq.com/openai/v1", keyEnv: []string{"GROQ_API_KEY"}, model: "llama-3.3-70b-versatile"},
	"deepseek":   {wire: OpenAI, baseURL: "https://api.deepseek.com/v1", keyEnv: []string{"DEEPSEEK_API_KEY"}, model: "deepseek-chat"},
	"cerebras":   {wire: OpenAI, baseURL: "https://api.cerebras.ai/v1", keyEnv: []string{"CEREBRAS_API_KEY"}, model: "llama-3.3-70b"},
	"openrouter": {wire: OpenAI, baseURL: "https://openrouter.ai/api/v1", keyEnv: []string{"OPENROUTER_API_KEY"}, model: "openai/gpt-4o-mini"},
	"ollama":     {wire: OpenAI, keyless: true},
	"vllm":       {wire: OpenAI, keyless: true},
	"lmstudio":   {wire: OpenAI, keyless: true},
}

// ConfigFromEnv builds a Config for a template's provider and model, with
// the environment's keys and overrides, and reports whether it is usable (a
// key is present, or a base URL is set for a keyless server); when it is
// not, the caller should fall back to an offline model. Temperature and
// maxTokens pass through from the template.
//
// templateProvider is the template's provider name ("anthropic", "openai",
// "gemini", "groq", "deepseek", "cerebras", "openrouter", or the keyless
// "ollama", "vllm", "lmstudio"; an "llm." prefix is ignored; empty picks
// anthropic if ANTHROPIC_API_KEY is set, else openai). The environment:
//
//   - LLM_PROVIDER replaces templateProvider; LLM_MODEL replaces the model;
//     LLM_BASE_URL replaces the base URL, for any provider.
//   - openai: OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL.
//   - anthropic: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL.
//   - gemini (GEMINI_API_KEY or GOOGLE_API_KEY), groq (GROQ_API_KEY),
//     deepseek (DEEPSEEK_API_KEY), cerebras (CEREBRAS_API_KEY), openrouter
//     (OPENROUTER_API_KEY): the openai wire at the vendor's endpoint.
//   - ollama, vllm, lmstudio: the openai wire, usable once LLM_BASE_URL or
//     OPENAI_BASE_URL names the server; OPENAI_API_KEY is sent if set.
//   - LLM_ALLOWED_TOOLS (true or false) says whether the server takes
//     tool_choice allowed_tools (Config.RestrictsTools); by default only
//     openai at its own endpoint does.
//
// Model precedence: LLM_MODEL, then OPENAI_MODEL/ANTHROPIC_MODEL for those
// two providers, then the template's model, then the vendor's default. The
// error reports an unknown provider or a malformed base URL.
func ConfigFromEnv(templateProvider string, model string, temperature *float64, maxTokens int) (Config, bool, error) {
	return configFrom(os.Getenv, templateProvider, model, temperature, maxTokens)
}

func configFrom(getenv func(string) string, templateProvider, model string, temperature *float64, maxTokens int) (Config, bool, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	name := strings.ToLower(strings.TrimSpace(templateProvider))
	if p := env("LLM_PROVIDER"); p != "" {
		name = strings.ToLower(p)
	}
	name = strings.TrimPrefix(name, "llm.")
	if name == "" {
		name = "openai"
		if env("ANTHROPIC_API_KEY") != "" {
			name = "anthropic"
		}
	}
	v, ok := vendors[name]
	if !ok {
		return Config{}, false, fmt.Errorf("provider: unknown provider %q (known: anthropic, openai, gemini, groq, deepseek, cerebras, openrouter, ollama, vllm, lmstudio)", name)
	}
	cfg := Config{Provider: v.wire, BaseURL: v.baseURL, Temperature: temperature, MaxTokens: maxTokens}

	for _, k := range v.keyEnv {
		if key := env(k); key != "" {
			cfg.APIKey = key
			break
		}
	}
	switch name {
	case "openai":
		if u := env("OPENAI_BASE_URL"); u != "" {
			cfg.BaseURL = u
		}
		model = firstNonEmpty(env("OPENAI_MODEL"), model)
	case "anthropic":
		if u := env("ANTHROPIC_BASE_URL"); u != "" {
			cfg.BaseURL = u
		}
		model = firstNonEmpty(env("ANTHROPIC_MODEL"), model)
	}
	if v.keyless {
		cfg.BaseURL = env("OPENAI_BASE_URL")
		cfg.APIKey = env("OPENAI_API_KEY")
		model = firstNonEmpty(env("OPENAI_MODEL"), model)
	}
	if u := env("LLM_BASE_URL"); u != "" {
		cfg.BaseURL = u
	}
	cfg.Model = firstNonEmpty(env("LLM_MODEL"), model, v.model)
	// Only the vendor's own endpoint is known to take allowed_tools: a
	// server at another URL speaking the openai wire (vLLM, a proxy) may
	// reject it, unless LLM_ALLOWED_TOOLS says otherwise.
	cfg.RestrictsTools = v.restricts && cfg.BaseURL == v.baseURL
	switch a := strings.ToLower(env("LLM_ALLOWED_TOOLS")); a {
	case "":
	case "true", "1":
		cfg.RestrictsTools = true
	case "false", "0":
		cfg.RestrictsTools = false
	default:
		return cfg, false, fmt.Errorf("provider: LLM_ALLOWED_TOOLS=%q: want true or false (whether the server takes tool_choice allowed_tools)", a)
	}
	if cfg.RestrictsTools && v.wire == Anthropic {
		return cfg, false, fmt.Errorf("provider: LLM_ALLOWED_TOOLS=true: %s has no allowed_tools; choose options.toolFiltering in the template instead", name)
	}

	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, false, fmt.Errorf("provider: the base URL for %s is not an http(s) URL", name)
		}
	}
	usable := cfg.APIKey != "" || (v.keyless && cfg.BaseURL != "") || (cfg.BaseURL != "" && cfg.BaseURL != v.baseURL)
	if cfg.Model == "" {
		// A keyless server with no model named cannot be called.
		usable = false
	}
	return cfg, usable, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
