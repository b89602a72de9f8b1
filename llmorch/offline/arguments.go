package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentdock-go/agentdock/chat"
)

// schema is the part of a JSON Schema that argument generation reads. Both
// boolean and object schemas decode into it.
type schema struct {
	// never is set for the schema false, which no value satisfies.
	never bool

	Type        json.RawMessage    `json:"type"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Items       json.RawMessage    `json:"items"`
	Enum        []json.RawMessage  `json:"enum"`
	Const       json.RawMessage    `json:"const"`
	Default     json.RawMessage    `json:"default"`
	Minimum     *float64           `json:"minimum"`
	Maximum     *float64           `json:"maximum"`
	ExclMinimum json.RawMessage    `json:"exclusiveMinimum"`
	ExclMaximum json.RawMessage    `json:"exclusiveMaximum"`
	MultipleOf  *float64           `json:"multipleOf"`
	MinLength   *int               `json:"minLength"`
	MaxLength   *int               `json:"maxLength"`
	MinItems    *int               `json:"minItems"`
	MaxItems    *int               `json:"maxItems"`
	UniqueItems bool               `json:"uniqueItems"`
	Pattern     string             `json:"pattern"`
	Format      string             `json:"format"`
	Description string             `json:"description"`
	AnyOf       []*schema          `json:"anyOf"`
	OneOf       []*schema          `json:"oneOf"`
	AllOf       []*schema          `json:"allOf"`
}

func (s *schema) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*s = schema{}
		return nil
	case "false":
		*s = schema{never: true}
		return nil
	}
	type plain schema // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = schema(p)
	return nil
}

// types returns the schema's types, null last.
func (s *schema) types() ([]string, error) {
	if len(s.Type) == 0 {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(s.Type, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(s.Type, &many); err != nil {
		return nil, fmt.Errorf("type: want a string or a list of strings, got %s", s.Type)
	}
	slices.SortStableFunc(many, func(a, b string) int {
		switch {
		case a == "null" && b != "null":
			return 1
		case b == "null" && a != "null":
			return -1
		}
		return 0
	})
	return many, nil
}

// itemSchema returns the schema of array items (the first one for the tuple
// form of older drafts).
func (s *schema) itemSchema() (*schema, error) {
	raw := bytes.TrimSpace(s.Items)
	if len(raw) == 0 {
		return &schema{}, nil
	}
	if raw[0] == '[' {
		var list []*schema
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		if len(list) == 0 || list[0] == nil {
			return &schema{}, nil
		}
		return list[0], nil
	}
	var it schema
	if err := json.Unmarshal(raw, &it); err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	return &it, nil
}

// maxGenerated bounds the length of one generated string.
const maxGenerated = 1 << 20

// errSkip reports that no value was generated for an optional field.
var errSkip = errors.New("no value")

// arguments generates the arguments of a call of spec: a JSON object that
// satisfies its parameters schema, with content built from the topic.
func arguments(spec chat.ToolSpec, tp *topic, requiredOnly bool) (json.RawMessage, error) {
	raw := bytes.TrimSpace(spec.Parameters)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var s schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	g := &generator{tool: spec, topic: tp, requiredOnly: requiredOnly}
	v, err := g.object(&s, "")
	if err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode arguments: %w", err)
	}
	return out, nil
}

type generator struct {
	tool  chat.ToolSpec
	topic *topic
	depth int
	// requiredOnly leaves out every optional property.
	requiredOnly bool
}

// validArguments generates the arguments of a call of spec and checks them
// against its schema with a JSON Schema validator: the tools' own schemas
// (built-in, MCP, an embedder's) use keywords the generator does not read.
// When the full arguments fail, the required properties alone are tried.
func validArguments(spec chat.ToolSpec, tp *topic) (json.RawMessage, error) {
	args, err := arguments(spec, tp, false)
	if err != nil {
		return nil, err
	}
	verr := checkArguments(spec.Parameters, args)
	if verr == nil {
		return args, nil
	}
	if fewer, err := arguments(spec, tp, true); err == nil && checkArguments(spec.Parameters, fewer) == nil {
		return fewer, nil
	}
	return nil, fmt.Errorf("no generated arguments satisfy the parameters schema: %w", verr)
}

// compiled caches the compiled parameter schemas by their text; a tool's
// schema is the same on every call.
var compiled sync.Map // string -> *jsonschema.Schema or error

// checkArguments validates args against the parameters schema. A schema
// that does not compile is not this model's to judge (the registry
// reports it): the arguments pass.
func checkArguments(params, args json.RawMessage) error {
	raw := bytes.TrimSpace(params)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v, ok := compiled.Load(string(raw))
	if !ok {
		v = compileSchema(raw)
		compiled.Store(string(raw), v)
	}
	sch, ok := v.(*jsonschema.Schema)
	if !ok {
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

func compileSchema(raw []byte) any {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Only the document itself: a $ref to anywhere else is not fetched.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const loc = "mem://offline/parameters.json"
	if err := c.AddResource(loc, doc); err != nil {
		return err
	}
	s, err := c.Compile(loc)
	if err != nil {
		return err
	}
	return s
}

// maxDepth bounds recursion into nested schemas (a self-similar schema
// written out deeply, or hostile input).
const maxDepth = 8

// value generates a value for the field at path that satisfies s. For array
// items path is the array's and index numbers the item; otherwise index is
// -1.
func (g *generator) value(s *schema, name string, index int) (any, error) {
	if s == nil {
		s = &schema{}
	}
	if s.never {
		return nil, fmt.Errorf("%s: the schema false admits no value", fieldPath(name))
	}
	if g.depth >= maxDepth {
		return nil, fmt.Errorf("%s: nested more than %d levels", fieldPath(name), maxDepth)
	}
	g.depth++
	defer func() { g.depth-- }()

	if len(s.Const) > 0 {
		return json.RawMessage(s.Const), nil
	}
	if len(s.Enum) > 0 {
		return g.enum(s.Enum, index), nil
	}
	if len(s.AllOf) > 0 {
		return g.value(merge(s), name, index)
	}
	types, err := s.types()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fieldPath(name), err)
	}
	if len(types) == 0 {
		for _, alt := range append(slices.Clip(s.OneOf), s.AnyOf...) {
			if alt != nil && !alt.never {
				return g.value(alt, name, index)
			}
		}
		types = []string{inferType(s)}
	}
	switch types[0] {
	case "object":
		return g.object(s, name)
	case "array":
		return g.array(s, name)
	case "string":
		return g.text(s, name, index)
	case "integer":
		return g.number(s, name, index, true)
	case "number":
		return g.number(s, name, index, false)
	case "boolean":
		var b bool
		if json.Unmarshal(s.Default, &b) == nil {
			return b, nil
		}
		return false, nil
	case "null":
		return nil, nil
	}
	return nil, fmt.Errorf("%s: unknown type %q", fieldPath(name), types[0])
}

func fieldPath(name string) string {
	if name == "" {
		return "arguments"
	}
	return "field " + strconv.Quote(name)
}

func inferType(s *schema) string {
	switch {
	case len(s.Properties) > 0 || len(s.Required) > 0:
		return "object"
	case len(s.Items) > 0 || s.MinItems != nil || s.MaxItems != nil:
		return "array"
	case s.Minimum != nil || s.Maximum != nil || s.MultipleOf != nil:
		return "number"
	}
	return "string"
}

// merge flattens allOf into one schema: later subschemas fill what earlier
// ones leave unset; properties and required lists are united.
func merge(s *schema) *schema {
	out := *s
	out.AllOf = nil
	out.Properties = map[string]*schema{}
	for k, v := range s.Properties {
		out.Properties[k] = v
	}
	for _, sub := range s.AllOf {
		if sub == nil {
			continue
		}
		m := merge(sub)
		if m.never {
			out.never = true
		}
		if len(out.Type) == 0 {
			out.Type = m.Type
		}
		for k, v := range m.Properties {
			if _, ok := out.Properties[k]; !ok {
				out.Properties[k] = v
			}
		}
		for _, r := range m.Required {
			if !slices.Contains(out.Required, r) {
				out.Required = append(out.Required, r)
			}
		}
		if len(out.Enum) == 0 {
			out.Enum = m.Enum
		}
		if len(out.Const) == 0 {
			out.Const = m.Const
		}
		out.Minimum = tighter(out.Minimum, m.Minimum, math.Max)
		out.Maximum = tighter(out.Maximum, m.Maximum, math.Min)
		if out.MinLength == nil {
			out.MinLength = m.MinLength
		}
		if out.MaxLength == nil {
			out.MaxLength = m.MaxLength
		}
		if len(out.Items) == 0 {
			out.Items = m.Items
		}
	}
	return &out
}

func tighter(a, b *float64, pick func(x, y float64) float64) *float64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	v := pick(*a, *b)
	return &v
}

// object generates every required property and every optional one that can
// be generated, except optional aliases of other properties and optional
// open-ended numbers (isSetting).
func (g *generator) object(s *schema, name string) (any, error) {
	types, err := s.types()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fieldPath(name), err)
	}
	if len(types) > 0 && types[0] != "object" {
		return nil, fmt.Errorf("%s: want an object schema, got type %s", fieldPath(name), s.Type)
	}
	if len(s.AllOf) > 0 {
		s = merge(s)
	}
	keys := make([]string, 0, len(s.Properties)+len(s.Required))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	for _, k := range s.Required {
		if _, ok := s.Properties[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		required := slices.Contains(s.Required, k)
		if !required && (g.requiredOnly || isAlias(k, s.Properties) || isSetting(s.Properties[k])) {
			continue
		}
		v, err := g.value(s.Properties[k], joinPath(name, k), -1)
		if err != nil {
			if required {
				return nil, err
			}
			continue
		}
		out[k] = v
	}
	return out, nil
}

// isSetting reports whether a property is a number with no default and
// no bounds: not a choice within a range the tool expects (a limit of 1
// to 10, a confidence of 0 to 1) but a setting that changes what the tool
// does (a file server's head and tail, "if provided, only the first N
// lines"), which a model leaves out unless asked. The filesystem server
// refuses head and tail together.
func isSetting(s *schema) bool {
	if s == nil || len(s.Default) > 0 || len(s.Enum) > 0 || len(s.Const) > 0 ||
		s.Minimum != nil || s.Maximum != nil || len(s.ExclMinimum) > 0 || len(s.ExclMaximum) > 0 {
		return false
	}
	types, err := s.types()
	if err != nil || len(types) == 0 {
		return false
	}
	for _, t := range types {
		if t != "number" && t != "integer" && t != "null" {
			return false
		}
	}
	return true
}

func joinPath(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

// isAlias reports whether k is an AgentDock-style alias ("adTopic") of
// another declared property ("topic").
func isAlias(k string, props map[string]*schema) bool {
	canonical := aliasBase(k)
	if canonical == k {
		return false
	}
	_, ok := props[canonical]
	return ok
}

// aliasBase strips AgentDock's "ad" prefix: "adTopic" becomes "topic".
func aliasBase(k string) string {
	if len(k) > 2 && strings.HasPrefix(k, "ad") && unicode.IsUpper(rune(k[2])) {
		r, n := utf8.DecodeRuneInString(k[2:])
		return string(unicode.ToLower(r)) + k[2+n:]
	}
	return k
}

// baseName is the last path element of a field, without alias prefix, in
// lower case: the name that name patterns are matched against.
func baseName(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		path = path[i+1:]
	}
	return strings.ToLower(aliasBase(path))
}

// enum picks the value whose words best match the message, the first on a
// tie; array items (index >= 0) take the values after it in turn, so that
// unique lists can be filled.
func (g *generator) enum(values []json.RawMessage, index int) any {
	best, bestScore := 0, 0
	for i, v := range values {
		var s string
		if json.Unmarshal(v, &s) != nil {
			continue
		}
		score := 0
		for _, w := range words(s) {
			if g.topic.concepts[stem(w)] {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return json.RawMessage(values[(best+max(index, 0))%len(values)])
}

func (g *generator) array(s *schema, name string) (any, error) {
	item, err := s.itemSchema()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fieldPath(name), err)
	}
	// Three items show a list; deeper down one is enough, so that nested
	// arrays do not multiply.
	n := 3
	if g.depth > 2 {
		n = 1
	}
	if s.MinItems != nil {
		n = max(n, *s.MinItems)
	}
	if s.MaxItems != nil {
		n = min(n, max(*s.MaxItems, 0))
	}
	n = min(n, 100)
	out := make([]any, 0, n)
	seen := map[string]bool{}
	for i := 0; len(out) < n && i < n+10; i++ {
		v, err := g.value(item, name, i)
		if err != nil {
			return nil, err
		}
		if s.UniqueItems {
			key, _ := json.Marshal(v)
			if seen[string(key)] {
				continue
			}
			seen[string(key)] = true
		}
		out = append(out, v)
	}
	return out, nil
}

// Field-name patterns, matched against the base name by substring.
var (
	topicNames = []string{
		"topic", "subject", "query", "challenge", "question", "title", "problem", "theme", "keyword",
		"term", "prompt", "goal", "focus", "claim", "thesis", "motion", "search", "heading", "name",
	}
	// placeNames are fields that want a name, not prose: "Paris" for
	// "What is the weather in Paris?".
	placeNames       = []string{"city", "town", "place", "location", "country", "region", "destination", "address"}
	itemNames        = []string{"items", "options", "alternatives", "choices", "candidates", "subjects", "entities"}
	criteriaNames    = []string{"criteria", "criterion", "factors", "dimensions", "aspects", "metrics", "attributes"}
	perspectiveNames = []string{"perspective", "viewpoint", "position", "argument", "sides"}
	ideaNames        = []string{"idea", "suggestion", "solution", "proposal", "recommendation"}
	keywordNames     = []string{"keyword", "terms", "tags", "queries", "topics"}
	countNames       = []string{"limit", "count", "max", "num", "top", "results", "size", "number", "amount"}
	ratioNames       = []string{"confidence", "probability", "certainty", "score", "weight", "ratio", "temperature"}
)

// isPathName reports whether a field wants a file system path ("path",
// "filePath", "source", "dir"): a path, not prose.
func isPathName(name string) bool {
	switch name {
	case "file", "filename", "dir", "directory", "folder", "root", "source", "target":
		return true
	}
	return strings.HasSuffix(name, "path") || strings.HasSuffix(name, "paths") || strings.HasSuffix(name, "dir")
}

func nameHas(name string, patterns []string) bool {
	for _, p := range patterns {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

// text generates a string: a topic phrase for topic-like names and short
// fields, list entries for array items, sectioned text otherwise.
func (g *generator) text(s *schema, path string, index int) (any, error) {
	name := baseName(path)
	tp := g.topic
	var v string
	switch {
	case s.Format != "":
		v = formatted(s.Format, tp, index)
	case name == "message" && index < 0:
		// What to tell another agent (an agent tool): the user's request
		// itself, which the asked agent acts on as the user's.
		v = tp.message
	case nameHas(name, []string{"lang", "locale"}):
		v = "en"
	case nameHas(name, []string{"url", "link", "uri"}):
		v = "https://example.org/search?q=" + slug(tp.phrase)
	case isPathName(name):
		v = tp.path()
	case name == "id" || name == "slug":
		v = slug(tp.phrase)
	case nameHas(name, placeNames):
		v = tp.properTerm()
	case index >= 0:
		v = listEntry(name, tp, index)
	case nameHas(name, topicNames) || (s.MaxLength != nil && *s.MaxLength < 80):
		v = tp.phrase
	default:
		v = sections(g.tool, name, tp)
	}
	return fitString(v, s, path, tp)
}

// fitString makes v satisfy the string's length and pattern constraints.
func fitString(v string, s *schema, path string, tp *topic) (any, error) {
	if s.MinLength != nil {
		if *s.MinLength > maxGenerated {
			return nil, fmt.Errorf("%s: minLength %d is more than the %d characters generated at most", fieldPath(path), *s.MinLength, maxGenerated)
		}
		pad := tp.phrase
		if pad == "" {
			pad = "x"
		}
		var b strings.Builder
		b.WriteString(v)
		for n := utf8.RuneCountInString(v); n < *s.MinLength; n += utf8.RuneCountInString(pad) {
			if b.Len() > 0 {
				b.WriteByte(' ')
				n++
			}
			b.WriteString(pad)
		}
		v = b.String()
	}
	if s.MaxLength != nil && utf8.RuneCountInString(v) > *s.MaxLength {
		cut := cutRunes(v, max(*s.MaxLength, 0))
		if s.MinLength != nil && utf8.RuneCountInString(cut) < *s.MinLength {
			cut = v[:byteOffset(v, max(*s.MaxLength, 0))]
		}
		v = cut
	}
	if s.Pattern == "" {
		return v, nil
	}
	re, err := regexp.Compile(s.Pattern)
	if err != nil {
		// Not RE2 syntax; leave it to the tool's own validator.
		return v, nil
	}
	for _, cand := range []string{v, tp.phrase, slug(tp.phrase), tp.lastTerm(), "a", "1", "x"} {
		if re.MatchString(cand) && lengthOK(cand, s) {
			return cand, nil
		}
	}
	return nil, fmt.Errorf("%s: no generated text matches the pattern %q: %w", fieldPath(path), s.Pattern, errSkip)
}

func lengthOK(v string, s *schema) bool {
	n := utf8.RuneCountInString(v)
	return (s.MinLength == nil || n >= *s.MinLength) && (s.MaxLength == nil || n <= *s.MaxLength)
}

func formatted(format string, tp *topic, index int) string {
	switch format {
	case "date-time":
		return "2025-01-01T00:00:00Z"
	case "date":
		return "2025-01-01"
	case "time":
		return "12:00:00Z"
	case "email":
		return "offline@example.org"
	case "uri", "url", "iri", "uri-reference", "iri-reference":
		return "https://example.org/search?q=" + slug(tp.phrase)
	case "hostname":
		return "example.org"
	case "uuid":
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", max(index, 0))
	}
	return tp.phrase
}

// slug turns s into lower-case words joined by hyphens.
func slug(s string) string {
	ws := words(s)
	if len(ws) == 0 {
		return "topic"
	}
	return strings.Join(ws, "-")
}

func (g *generator) number(s *schema, path string, index int, integer bool) (any, error) {
	name := baseName(path)
	lo, hi := math.Inf(-1), math.Inf(1)
	if s.Minimum != nil {
		lo = *s.Minimum
	}
	if s.Maximum != nil {
		hi = *s.Maximum
	}
	exclLo, exclHi := false, false
	if v, ok := exclusiveBound(s.ExclMinimum); ok && v >= lo {
		lo, exclLo = v, true
	} else if string(s.ExclMinimum) == "true" && s.Minimum != nil {
		exclLo = true
	}
	if v, ok := exclusiveBound(s.ExclMaximum); ok && v <= hi {
		hi, exclHi = v, true
	} else if string(s.ExclMaximum) == "true" && s.Maximum != nil {
		exclHi = true
	}

	var v float64
	var def float64
	switch {
	case json.Unmarshal(s.Default, &def) == nil:
		v = def
	case nameHas(name, countNames):
		v = 5
	case !integer && nameHas(name, ratioNames):
		v = 0.7
	case nameHas(name, []string{"year"}):
		v = 2025
	case !math.IsInf(lo, 0) && !math.IsInf(hi, 0):
		v = lo + (hi-lo)/2
	case !math.IsInf(lo, 0):
		v = lo + 1
	case !math.IsInf(hi, 0):
		v = math.Min(hi-1, 1)
	default:
		v = 1
	}
	if index > 0 {
		v += float64(index)
	}
	if integer {
		v = math.Round(v)
	}
	step := 1.0
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		step = *s.MultipleOf
		v = math.Ceil(v/step) * step
	} else if !integer {
		step = 0
	}
	// Clamp into the bounds; an exclusive bound moves one step (or a
	// hundredth of the range) inside.
	if v < lo || (exclLo && v <= lo) {
		v = lo
		if exclLo {
			v = lo + inner(step, lo, hi)
		}
		if s.MultipleOf != nil && *s.MultipleOf > 0 {
			v = math.Ceil(v/step) * step
		} else if integer {
			v = math.Ceil(v)
			if exclLo && v <= lo {
				v++
			}
		}
	}
	if v > hi || (exclHi && v >= hi) {
		v = hi
		if exclHi {
			v = hi - inner(step, lo, hi)
		}
		if s.MultipleOf != nil && *s.MultipleOf > 0 {
			v = math.Floor(v/step) * step
		} else if integer {
			v = math.Floor(v)
			if exclHi && v >= hi {
				v--
			}
		}
	}
	if (v < lo || (exclLo && v <= lo)) && !math.IsInf(lo, 0) {
		return nil, fmt.Errorf("%s: no value fits between %g and %g", fieldPath(path), lo, hi)
	}
	if integer {
		if math.Abs(v) > 1<<53 {
			return nil, fmt.Errorf("%s: bound %g is too large", fieldPath(path), v)
		}
		return int64(v), nil
	}
	return v, nil
}

// inner is how far inside an exclusive bound a value is placed.
func inner(step, lo, hi float64) float64 {
	if step > 0 {
		return step
	}
	if !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && hi > lo {
		return (hi - lo) / 100
	}
	return 1
}

// exclusiveBound reads a numeric exclusiveMinimum or exclusiveMaximum (draft
// 6 and later); the boolean form of draft 4 reports false.
func exclusiveBound(raw json.RawMessage) (float64, bool) {
	var v float64
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	return v, true
}
