package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// decodeObject parses tool arguments into a map, keeping numbers exact
// (json.Number) so that validation and re-encoding do not round them. Empty
// arguments count as {}: some providers send "" for a call without arguments.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("arguments are not valid JSON: unexpected data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonType(v))
	}
	if err := checkNumbers(obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Bounds of a number in tool arguments: its length and its written
// exponent. Far past float64's range (1e308) and any use, and short of
// where math/big gives up: jsonschema validates numbers as big.Rat and does
// not check SetString's result, so a number like 1e11111111 in a model's
// arguments panicked the validator (found by FuzzExecuteArguments); such
// numbers also cost seconds to expand.
const (
	maxNumberLength = 1000
	maxExponent     = 1000
)

// checkNumbers refuses, anywhere in v, a number longer than
// maxNumberLength characters or with an exponent beyond ±maxExponent.
func checkNumbers(v any) error {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if len(s) > maxNumberLength {
			return fmt.Errorf("a number of %d characters is out of range: the limit is %d", len(s), maxNumberLength)
		}
		i := strings.IndexAny(s, "eE")
		if i < 0 {
			return nil
		}
		exp := strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")
		if exp == "" {
			return nil // an exponent of zero
		}
		if n, err := strconv.Atoi(exp); err != nil || n > maxExponent {
			return fmt.Errorf("the number %s is out of range: exponents beyond ±%d are refused", clip(s, 40), maxExponent)
		}
	case []any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// renameAliases moves alias fields to their canonical names. Sending both an
// alias and its canonical field is accepted when the values agree and refused
// when they differ, since either choice would silently drop what the model
// wrote.
func renameAliases(args map[string]any, aliases map[string]string) error {
	if len(aliases) == 0 {
		return nil
	}
	keys := make([]string, 0, len(aliases))
	for a := range aliases {
		keys = append(keys, a)
	}
	sort.Strings(keys)
	for _, alias := range keys {
		v, ok := args[alias]
		if !ok {
			continue
		}
		canonical := aliases[alias]
		if existing, both := args[canonical]; both && !reflect.DeepEqual(existing, v) {
			return fmt.Errorf("fields %q and %q mean the same thing but have different values; send only %q", alias, canonical, canonical)
		}
		delete(args, alias)
		args[canonical] = v
	}
	return nil
}

// describeValidation turns a schema validation error into one line that
// names each offending field and what is wrong with it, for the model to fix
// its call. Messages are sorted so the text is stable.
func describeValidation(err error, fields []string) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var msgs []string
	seen := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			for _, m := range describeLeaf(e, fields) {
				if !seen[m] {
					seen[m] = true
					msgs = append(msgs, m)
				}
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(msgs) == 0 {
		return "arguments do not match the schema"
	}
	sort.Strings(msgs)
	return strings.Join(msgs, "; ")
}

func describeLeaf(e *jsonschema.ValidationError, fields []string) []string {
	at := strings.Join(e.InstanceLocation, ".")
	field := func(name string) string {
		if at == "" {
			return name
		}
		return at + "." + name
	}
	subject := fmt.Sprintf("field %q", at)
	if at == "" {
		subject = "arguments"
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		out := make([]string, 0, len(k.Missing))
		for _, m := range k.Missing {
			out = append(out, fmt.Sprintf("missing required field %q", field(m)))
		}
		return out
	case *kind.AdditionalProperties:
		out := make([]string, 0, len(k.Properties))
		for _, p := range k.Properties {
			msg := fmt.Sprintf("unknown field %q", field(clip(p, 64)))
			if at == "" && len(fields) > 0 {
				msg += " (accepted fields: " + strings.Join(fields, ", ") + ")"
			}
			out = append(out, msg)
		}
		return out
	case *kind.Type:
		return []string{fmt.Sprintf("%s must be %s, got %s", subject, strings.Join(k.Want, " or "), k.Got)}
	case *kind.MinLength:
		if k.Want == 1 {
			return []string{subject + " must not be empty"}
		}
		return []string{fmt.Sprintf("%s is too short: %d characters, minimum %d", subject, k.Got, k.Want)}
	case *kind.MaxLength:
		return []string{fmt.Sprintf("%s is too long: %d characters, maximum %d", subject, k.Got, k.Want)}
	case *kind.Minimum:
		return []string{fmt.Sprintf("%s must be at least %s", subject, k.Want.RatString())}
	case *kind.Maximum:
		return []string{fmt.Sprintf("%s must be at most %s", subject, k.Want.RatString())}
	case *kind.ExclusiveMinimum:
		return []string{fmt.Sprintf("%s must be greater than %s", subject, k.Want.RatString())}
	case *kind.ExclusiveMaximum:
		return []string{fmt.Sprintf("%s must be less than %s", subject, k.Want.RatString())}
	}
	return []string{subject + ": " + e.ErrorKind.LocalizedString(printer)}
}
