package provider

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
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

// Setup is the model the environment gives a template: its Config, and
// what the start-up log says about it.
type Setup struct {
	Config Config
	// Usable reports whether Config can be called (a key is present, or a
	// base URL names a keyless server); when it is not, the caller falls
	// back to an offline model.
	Usable bool
	// Vendor is the provider's name ("openai", "groq", "ollama", ...).
	Vendor string
	// Note says why Vendor is not the template's own provider, or why no
	// provider is usable; "" when the template's provider is used as named.
	Note string
}

// ConfigFromEnv builds the Setup of a template's provider and model, with
// the environment's keys and overrides. Temperature and maxTokens pass
// through from the template.
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
// A template whose provider has no key, without LLM_PROVIDER, is answered
// by the one provider that is configured (its key, or its base URL for
// openai and anthropic), with that provider's model (LLM_MODEL, its
// *_MODEL, or its default: the template's model names another vendor's);
// with several configured, LLM_PROVIDER must choose. A key is only ever
// sent to its own vendor.
//
// Model precedence: LLM_MODEL, then OPENAI_MODEL/ANTHROPIC_MODEL for those
// two providers, then the template's model, then the vendor's default. The
// error reports an unknown provider or a malformed base URL.
func ConfigFromEnv(templateProvider string, model string, temperature *float64, maxTokens int) (Setup, error) {
	return configFrom(os.Getenv, templateProvider, model, temperature, maxTokens)
}

func configFrom(getenv func(string) string, templateProvider, model string, temperature *float64, maxTokens int) (Setup, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	name := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(templateProvider)), "llm.")
	chosen := env("LLM_PROVIDER") != ""
	if chosen {
		name = strings.TrimPrefix(strings.ToLower(env("LLM_PROVIDER")), "llm.")
	}
	if name == "" {
		name = "openai"
		if env("ANTHROPIC_API_KEY") != "" {
			name = "anthropic"
		}
	}
	s, err := vendorSetup(env, name, model, temperature, maxTokens)
	if err != nil || s.Usable {
		return s, err
	}
	if chosen {
		s.Note = "LLM_PROVIDER=" + name + " has no " + needs(name)
		return s, nil
	}
	var configured []string
	for _, n := range slices.Sorted(maps.Keys(vendors)) {
		if vendors[n].keyless || n == name {
			continue
		}
		if alt, err := vendorSetup(env, n, "", temperature, maxTokens); err == nil && alt.Usable {
			configured = append(configured, n)
		}
	}
	switch len(configured) {
	case 0:
		s.Note = "no model provider is configured: " + name + " needs " + needs(name) + " (or set another provider's key, or LLM_PROVIDER with LLM_BASE_URL)"
	case 1:
		alt, err := vendorSetup(env, configured[0], "", temperature, maxTokens)
		alt.Note = "the template names " + name + ", which has no " + needs(name) + "; " + configured[0] + " is the only provider configured"
		return alt, err
	default:
		s.Note = name + " has no " + needs(name) + ", and several providers are configured (" + strings.Join(configured, ", ") + "): set LLM_PROVIDER to choose one"
	}
	return s, nil
}

// needs names what makes a vendor usable.
func needs(name string) string {
	v := vendors[name]
	if v.keyless {
		return "LLM_BASE_URL or OPENAI_BASE_URL"
	}
	return strings.Join(v.keyEnv, " or ")
}

// vendorSetup is the Setup of one vendor as the environment configures it.
func vendorSetup(env func(string) string, name, model string, temperature *float64, maxTokens int) (Setup, error) {
	v, ok := vendors[name]
	if !ok {
		return Setup{}, fmt.Errorf("provider: unknown provider %q (known: anthropic, openai, gemini, groq, deepseek, cerebras, openrouter, ollama, vllm, lmstudio)", name)
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
		return Setup{}, fmt.Errorf("provider: LLM_ALLOWED_TOOLS=%q: want true or false (whether the server takes tool_choice allowed_tools)", a)
	}
	if cfg.RestrictsTools && v.wire == Anthropic {
		return Setup{}, fmt.Errorf("provider: LLM_ALLOWED_TOOLS=true: %s has no allowed_tools; choose options.toolFiltering in the template instead", name)
	}

	s := Setup{Config: cfg, Vendor: name}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, fmt.Errorf("provider: the base URL for %s is not an http(s) URL", name)
		}
	}
	// A keyless server with no model named cannot be called.
	s.Usable = cfg.Model != "" && (cfg.APIKey != "" || (v.keyless && cfg.BaseURL != "") || (cfg.BaseURL != "" && cfg.BaseURL != v.baseURL))
	return s, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
