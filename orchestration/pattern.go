package orchestration

import "strings"

// matchPattern reports whether name matches a tool pattern, in which * stands
// for any run of characters (also none) and everything else must match
// exactly, case-sensitively.
func matchPattern(pattern, name string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == name
	}
	parts := strings.Split(pattern, "*")
	// The first part anchors at the start, the last at the end, and the
	// middle parts are found left to right; greedy leftmost matching is
	// enough because * matches anything.
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	rest := name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if matchPattern(p, name) {
			return true
		}
	}
	return false
}
