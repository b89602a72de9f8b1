package jsonopt

import (
	"encoding/json"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want String
	}{
		{`{}`, String{}},
		{`{"s": null}`, String{Set: true, Null: true}},
		{`{"s": ""}`, String{Set: true}},
		{`{"s": "Explore"}`, String{Set: true, Value: "Explore"}},
	} {
		var v struct {
			S String `json:"s"`
		}
		if err := json.Unmarshal([]byte(tc.in), &v); err != nil || v.S != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.in, v.S, err, tc.want)
		}
	}
	var v struct {
		S String `json:"s"`
	}
	if err := json.Unmarshal([]byte(`{"s": 3}`), &v); err == nil {
		t.Error("a number was accepted as a string")
	}
}
