// Package web holds the chat page that the server serves at /: plain HTML,
// CSS and ES modules with no build step, plus the vendored browser builds of
// marked, DOMPurify and highlight.js. The files are embedded so that the binary is the whole
// deployment.
package web

import (
	"embed"
	"io/fs"
)

// The files are listed by name rather than with a wildcard so that an editor's
// stray file in the directory never ships; vendor/ holds only what
// e2e/scripts/vendor.js copies there.
//
//go:embed index.html style.css favicon.svg js/*.js vendor/*.js vendor/*.mjs vendor/*.css vendor/LICENSE.* vendor/README.md
var files embed.FS

// FS returns the page's files, rooted so that "index.html" is at the top.
func FS() fs.FS { return files }
