// Package jsonopt has JSON values that tell an absent key from a null one,
// for file formats whose expectations may say "must be null" as well as
// "not checked" (scenarios and transcripts).
package jsonopt

import (
	"bytes"
	"encoding/json"
)

// String is a JSON value that may be absent, null or a string.
type String struct {
	Set   bool
	Null  bool
	Value string
}

// UnmarshalJSON records that the key was present.
func (o *String) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}
