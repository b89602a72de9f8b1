package tools

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMaxResultBytes is the most bytes of one tool result the model reads
// when nothing else is set (llmorch.Budget.MaxToolResultBytes, server
// MAX_TOOL_RESULT_BYTES, template options.maxToolResultBytes). A result is
// stored with the session and sent again with every later model request of
// it, so one large result would cost every turn that follows.
const DefaultMaxResultBytes = 64 << 10

// MinMaxResultBytes is the smallest result limit accepted: room for the
// note that says a result was cut, and for some of the result.
const MinMaxResultBytes = 1 << 10

// ResultLimit is the result limit in force for a call made under ctx: the
// Call's ResultLimit, else DefaultMaxResultBytes.
func ResultLimit(ctx context.Context) int {
	if c, ok := CallFrom(ctx); ok && c.ResultLimit > 0 {
		return c.ResultLimit
	}
	return DefaultMaxResultBytes
}

// LimitResult returns content when it has at most limit bytes; otherwise
// its beginning, cut at a character boundary, followed by a note for the
// model that says how long the result was, so that the whole stays within
// limit bytes. Every tool result passes through it in Registry.Execute;
// results that reach the runtime another way (a client's own tools) are
// cut with it too. A limit under MinMaxResultBytes counts as
// MinMaxResultBytes.
func LimitResult(content string, limit int) string {
	return LimitResultOf(content, len(content), limit)
}

// LimitResultOf is LimitResult for a tool that read only the beginning of a
// longer result: content is that beginning and size the whole result's
// bytes, which the note reports. A size over limit always gets the note,
// even when content alone would fit.
func LimitResultOf(content string, size, limit int) string {
	limit = max(limit, MinMaxResultBytes)
	size = max(size, len(content))
	if size <= limit {
		return content
	}
	note := fmt.Sprintf("\n\n[… %s cut to %s: the tool's result was longer than the limit on tool results; ask for less, or for a part]", FormatBytes(size), FormatBytes(limit))
	keep := limit - len(note)
	if keep < len(content) {
		for keep > 0 && !utf8.RuneStart(content[keep]) {
			keep--
		}
		content = content[:keep]
	}
	var b strings.Builder
	b.Grow(len(content) + len(note))
	b.WriteString(content)
	b.WriteString(note)
	return b.String()
}

// FormatBytes writes n as people read sizes: "512 bytes", "64 KiB",
// "14.3 MiB".
func FormatBytes(n int) string {
	const kib, mib = 1 << 10, 1 << 20
	unit := func(v float64, name string) string {
		s := strconv.FormatFloat(v, 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + " " + name
	}
	switch {
	case n < kib:
		return strconv.Itoa(n) + " bytes"
	case n < mib:
		return unit(float64(n)/kib, "KiB")
	}
	return unit(float64(n)/mib, "MiB")
}

// absPath finds absolute paths where a word starts: Unix paths of two or
// more segments ("/srv/app/config.json") and Windows drive paths
// ("C:\Users\me\notes.txt"). A URL's path follows "host" or ":", not a
// word start, so URLs are left alone.
var absPath = regexp.MustCompile("(^|[\\s\"'(\\[<=,;`])((?:/[^/\\s\"'()\\[\\]<>,;:`]+){2,}/?|[A-Za-z]:\\\\[^\\s\"'()\\[\\]<>,;`]+)")

// HidePaths replaces the absolute paths in an error message by "…/" and
// their last element, so that an error shown to a client (a tool's, an
// MCP server's, its stderr) does not tell where the runtime, its servers
// or their files live on the host. Registry.Execute applies it to every
// error result.
func HidePaths(msg string) string {
	if !strings.ContainsAny(msg, "/\\") {
		return msg
	}
	return absPath.ReplaceAllStringFunc(msg, func(m string) string {
		sub := absPath.FindStringSubmatch(m)
		lead, path := sub[1], strings.TrimRight(sub[2], `/\`)
		sep := "/"
		if !strings.HasPrefix(path, "/") {
			sep = `\`
		}
		return lead + "…" + sep + path[strings.LastIndexAny(path, `/\`)+1:]
	})
}
