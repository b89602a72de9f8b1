package guardrail

import (
	"bytes"
	"math"
	"sync"
)

// The kinds of credentials a secrets check finds.
const (
	SecretAWSAccessKey = "aws_access_key"
	SecretGitHubToken  = "github_token"
	SecretAnthropicKey = "anthropic_key"
	SecretOpenAIKey    = "openai_key"
	SecretSlackToken   = "slack_token"
	SecretStripeKey    = "stripe_key"
	SecretGoogleAPIKey = "google_api_key"
	SecretJWT          = "jwt"
	SecretPrivateKey   = "private_key"
	// SecretCredential is a password, secret or key assigned to a name that
	// says so ("password: hunter22", "api_key=..."): the name, the
	// assignment and the value.
	SecretCredential = "credential"
	// SecretHighEntropy is a long token of mixed letters and digits that
	// reads as random: an unknown provider's key.
	SecretHighEntropy = "high_entropy"
)

// SecretKinds lists every kind a secrets check knows, in the order its
// finders run.
var SecretKinds = []string{SecretAWSAccessKey, SecretGitHubToken, SecretAnthropicKey, SecretOpenAIKey, SecretSlackToken,
	SecretStripeKey, SecretGoogleAPIKey, SecretJWT, SecretPrivateKey, SecretCredential, SecretHighEntropy}

// tokenRune: a rune of a key or token.
func tokenRune(r rune) bool { return isAlnum(r) || r == '_' || r == '-' }

// wholeToken accepts a candidate no token rune touches.
func wholeToken(b []byte, s, e int, final bool) (int, verdict) {
	return e, boundaries(b, s, e, final, tokenRune)
}

// maxPrivateKey bounds a private key block: a PEM RSA 4096 key is about
// 3.3 KB, and a block whose end does not come within this is cut here.
const maxPrivateKey = 16 << 10

// tokenFinder is a finder of a kind that is a whole token of at most max
// bytes: its pattern may leave the bound to max.
func tokenFinder(kind, pattern string, max int, valid validator, starts ...string) *finder {
	f := newFinder(kind, pattern, valid)
	f.max, f.token = max, true
	if len(starts) > 0 {
		f.starts = newStartSet(starts, false)
	}
	return f
}

var secretFinders = sync.OnceValue(func() map[string][]*finder {
	aws := tokenFinder(SecretAWSAccessKey, `(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}`, 20, wholeToken, "AKIA", "ASIA", "ABIA", "ACCA")
	github := tokenFinder(SecretGitHubToken, `gh[pousr]_[A-Za-z0-9]{36,}`, 255, wholeToken, "ghp_", "gho_", "ghu_", "ghs_", "ghr_")
	githubPAT := tokenFinder(SecretGitHubToken, `github_pat_[A-Za-z0-9_]{22,}`, 255, wholeToken, "github_pat_")
	anthropic := tokenFinder(SecretAnthropicKey, `sk-ant-[A-Za-z0-9_\-]{20,}`, 207, wholeToken, "sk-ant-")
	openai := tokenFinder(SecretOpenAIKey, `sk-[A-Za-z0-9_\-]{20,}`, 220, func(b []byte, s, e int, final bool) (int, verdict) {
		if bytes.HasPrefix(b[s:e], []byte("sk-ant-")) || !bytes.ContainsAny(b[s+3:e], "0123456789") {
			return e, reject
		}
		return wholeToken(b, s, e, final)
	}, "sk-")
	slack := tokenFinder(SecretSlackToken, `xox[abposr]-[A-Za-z0-9\-]{10,}`, 255, wholeToken, "xox")
	stripe := tokenFinder(SecretStripeKey, `[srp]k_(?:live|test)_[A-Za-z0-9]{16,}`, 255, wholeToken,
		"sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_")
	google := tokenFinder(SecretGoogleAPIKey, `AIza[0-9A-Za-z_\-]{35}`, 39, wholeToken, "AIza")
	jwt := tokenFinder(SecretJWT, `eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`, 3*1024, wholeToken, "eyJ")
	jwt.need = []byte(".")
	private := newFinder(SecretPrivateKey, `-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----`, validPrivateKey)
	private.starts = newStartSet([]string{"-----BEGIN "}, false)
	credential := newFinder(SecretCredential,
		`(?i)(?:password|passwd|passphrase|pwd|secret|client[_\-]?secret|api[_\-]?key|access[_\-]?key|access[_\-]?token|auth[_\-]?token|private[_\-]?key)["']?[ \t]{0,3}[:=][ \t]{0,3}["']?[^\s"'<>]{6,}`,
		validCredential)
	credential.max = 256
	credential.starts = newStartSet([]string{"password", "passwd", "passphrase", "pwd", "secret", "client", "api", "access", "auth", "private"}, true)
	entropy := tokenFinder(SecretHighEntropy, `[A-Za-z0-9+/_\-]{24,}={0,2}`, 258, validHighEntropy)
	return map[string][]*finder{
		SecretAWSAccessKey: {aws},
		SecretGitHubToken:  {github, githubPAT},
		SecretAnthropicKey: {anthropic},
		SecretOpenAIKey:    {openai},
		SecretSlackToken:   {slack},
		SecretStripeKey:    {stripe},
		SecretGoogleAPIKey: {google},
		SecretJWT:          {jwt},
		SecretPrivateKey:   {private},
		SecretCredential:   {credential},
		SecretHighEntropy:  {entropy},
	}
})

var pemEnd = []byte("-----END ")

// validPrivateKey extends a private key's header to the end of its block:
// the END line's last dash, or maxPrivateKey bytes after the header, or
// the end of the text, whichever comes first.
func validPrivateKey(b []byte, s, e int, final bool) (int, verdict) {
	limit := min(len(b), e+maxPrivateKey)
	if k := bytes.Index(b[e:limit], pemEnd); k >= 0 {
		after := e + k + len(pemEnd)
		if j := bytes.Index(b[after:limit], []byte("-----")); j >= 0 {
			return after + j + 5, accept
		}
	}
	if !final && len(b) < e+maxPrivateKey {
		return e, wait
	}
	return limit, accept
}

// validCredential accepts an assignment whose name is a whole word and
// whose value is not a placeholder a document shows ("********", "<your
// key>", "xxx..."): the value must hold a letter or a digit and not be one
// character repeated.
func validCredential(b []byte, s, e int, final bool) (int, verdict) {
	if r, ok := prevRune(b, s); ok && tokenRune(r) {
		return e, reject
	}
	// The value is the run after the last of the assignment's characters.
	v := e
	for v > s && !bytes.ContainsRune([]byte(":=\"' \t"), rune(b[v-1])) {
		v--
	}
	value := b[v:e]
	if len(value) == 0 {
		return e, reject
	}
	first, same, alnum := value[0], true, false
	for _, c := range value {
		same = same && c == first
		alnum = alnum || isAlnum(rune(c))
	}
	if same || !alnum {
		return e, reject
	}
	if r, ok, w := nextRune(b, e, final); w {
		return e, wait
	} else if ok && !isSpaceOrQuote(r) && r != ',' && r != ';' && r != ')' && r != '}' && r != ']' && r != '.' && r != '>' && r != '<' {
		return e, reject
	}
	return e, accept
}

func isSpaceOrQuote(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '"' || r == '\''
}

// validHighEntropy accepts a token of 24 or more characters that mixes
// upper and lower case letters and digits, changes class often (unlike an
// identifier in camel case) and has the Shannon entropy of random text.
func validHighEntropy(b []byte, s, e int, final bool) (int, verdict) {
	token := func(r rune) bool { return tokenRune(r) || r == '+' || r == '/' || r == '=' }
	if v := boundaries(b, s, e, final, token); v != accept {
		return e, v
	}
	t := b[s:e]
	var upper, lower, digit, changes int
	var counts [256]int
	class := func(c byte) int {
		switch {
		case 'A' <= c && c <= 'Z':
			return 1
		case 'a' <= c && c <= 'z':
			return 2
		case isDigit(rune(c)):
			return 3
		}
		return 4
	}
	for i, c := range t {
		counts[c]++
		switch class(c) {
		case 1:
			upper++
		case 2:
			lower++
		case 3:
			digit++
		}
		if i > 0 && class(c) != class(t[i-1]) {
			changes++
		}
	}
	if upper < 2 || lower < 2 || digit < 2 || float64(changes) < 0.3*float64(len(t)) {
		return e, reject
	}
	entropy := 0.0
	for _, n := range counts {
		if n > 0 {
			p := float64(n) / float64(len(t))
			entropy -= p * math.Log2(p)
		}
	}
	if entropy < 0.85*math.Log2(float64(min(len(t), 64))) {
		return e, reject
	}
	return e, accept
}
