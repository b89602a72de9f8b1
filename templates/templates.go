// Package templates embeds the agent templates that ship with the runtime:
// each directory holds one template.json. Extra templates are loaded from
// TEMPLATES_DIR at start-up.
package templates

import (
	"embed"
	"io/fs"
)

//go:embed */template.json
var files embed.FS

// FS returns the embedded templates, laid out as */template.json.
func FS() fs.FS { return files }
