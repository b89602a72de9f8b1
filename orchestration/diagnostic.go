package orchestration

import (
	"fmt"
	"strings"
)

// Severity says whether a Diagnostic stops a template from loading.
type Severity int

// Errors stop a template from loading; warnings are shown and logged.
const (
	SeverityError Severity = iota
	SeverityWarning
)

func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one problem found in a template, located precisely enough to
// fix it: the file, the path of the field inside it (with the step's name) and
// what is wrong.
type Diagnostic struct {
	Severity Severity
	// File is the template's file name, when it came from one.
	File string
	// Path locates the field, for example
	// `orchestration.steps[2] "EvaluationMode": conditions[0].type`.
	Path    string
	Message string
}

// String renders the diagnostic as one line: file: path: message.
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		b.WriteString(": ")
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// Diagnostics is the list of problems of one template.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(SeverityError) }

// Warnings returns only the warnings.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(SeverityWarning) }

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Err returns nil when there are no errors, and otherwise an error whose text
// lists every error, one per line.
func (ds Diagnostics) Err() error {
	errs := ds.Errors()
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Diagnostics: errs}
}

// InvalidError is returned for a template that does not load.
type InvalidError struct {
	Diagnostics Diagnostics
}

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		lines[i] = d.String()
	}
	if len(lines) == 1 {
		return "invalid template: " + lines[0]
	}
	return fmt.Sprintf("invalid template (%d errors):\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// diagnoser collects diagnostics under a path prefix.
type diagnoser struct {
	list Diagnostics
}

func (d *diagnoser) errorf(path, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Severity: SeverityError, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (d *diagnoser) warnf(path, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Severity: SeverityWarning, Path: path, Message: fmt.Sprintf(format, args...)})
}
