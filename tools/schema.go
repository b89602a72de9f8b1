package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a JSON Schema compiled to check values against: the schema of
// an answer's format, for example (llmorch.Format). Like a tool's
// parameters schema it must be self-contained: remote and file references
// are refused, so that compiling one never reads the network or disk.
type Schema struct {
	s      *jsonschema.Schema
	fields []string
}

// CompileSchema compiles raw, a JSON Schema object (draft 2020-12 unless
// it names another with $schema).
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the schema is not valid JSON: %w", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("the schema must be a JSON object")
	}
	if err := checkNumbers(doc); err != nil {
		return nil, fmt.Errorf("the schema: %w", err)
	}
	s, fields, err := compileDoc(doc)
	if err != nil {
		return nil, fmt.Errorf("the schema%w", err)
	}
	return &Schema{s: s, fields: fields}, nil
}

// CheckJSON reports why data, one JSON value, is not valid for s (each
// offending field named, in a stable order), or nil.
func (s *Schema) CheckJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("not valid JSON: more follows the first value")
	}
	if err := checkNumbers(v); err != nil {
		return err
	}
	if err := validateValue(s.s, v); err != nil {
		return errors.New(describeValidation(err, s.fields))
	}
	return nil
}

// validateValue is validate for any value.
func validateValue(s *jsonschema.Schema, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the value could not be validated (%v)", p)
		}
	}()
	return s.Validate(v)
}
