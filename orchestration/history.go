package orchestration

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sync/atomic"
)

// History is a bounded list of tool names, oldest first, that never changes
// once made: Append returns a new History and leaves its receiver as it was.
// States share histories instead of copying them, so that recording a tool
// costs the same with 100 entries as with one, and no holder of a state (a
// store, an update function that fails half-way, a caller of a store) can
// change what another holder sees.
//
// The zero History is empty. In JSON a History is an array of strings.
type History struct {
	// A History is not comparable with ==: two equal lists may sit in
	// different arrays. Use Equal.
	_      [0]func()
	buf    *historyBuf
	lo, hi int32 // the entries are buf.names[lo:hi]
}

// historyBuf is the array that versions of one history share. Entries below
// used are written once and never again; a version whose list ends at used
// may claim the next slot and write it (Append's fast path), any other
// version copies. So appending to an older version, or to the same version
// twice, never writes over an entry another version holds.
type historyBuf struct {
	used  atomic.Int32
	names []string
}

// NewHistory returns a History of names, which it copies.
func NewHistory(names ...string) History {
	if len(names) == 0 {
		return History{}
	}
	return adopt(slices.Clone(names))
}

// adopt makes a History of names, which the caller hands over.
func adopt(names []string) History {
	b := &historyBuf{names: names[:len(names):len(names)]}
	b.used.Store(int32(len(names)))
	return History{buf: b, hi: int32(len(names))}
}

// Len returns the number of entries.
func (h History) Len() int { return int(h.hi - h.lo) }

// At returns entry i (0 is the oldest); it panics when i is out of range.
func (h History) At(i int) string { return h.view()[i] }

// All yields the entries, oldest first.
func (h History) All() iter.Seq[string] { return slices.Values(h.view()) }

// Slice returns the entries in a new slice, which the caller may change.
func (h History) Slice() []string { return slices.Clone(h.view()) }

// Contains reports whether name is an entry.
func (h History) Contains(name string) bool { return slices.Contains(h.view(), name) }

// Equal reports whether the entries are names.
func (h History) Equal(names ...string) bool { return slices.Equal(h.view(), names) }

// view returns the entries without copying them: the package only reads it.
func (h History) view() []string {
	if h.buf == nil {
		return nil
	}
	return h.buf.names[h.lo:h.hi:h.hi]
}

// Append returns the history with name added and only the newest limit
// entries kept (at least the new one). It writes in place, into the array
// it shares with h, when h's list ends where the array's last writer left
// it and the array has room; otherwise it copies the entries it keeps into
// a new array with room for about as many appends again, so that the copies
// cost O(1) per append.
func (h History) Append(name string, limit int) History {
	limit = max(limit, 1)
	n := int(h.hi - h.lo)
	if b := h.buf; b != nil && int(h.hi) < len(b.names) && b.used.CompareAndSwap(h.hi, h.hi+1) {
		b.names[h.hi] = name
		out := History{buf: b, lo: h.lo, hi: h.hi + 1}
		if n+1 > limit {
			out.lo = out.hi - int32(limit)
		}
		return out
	}
	keep := min(n, limit-1)
	size := min(max(2*(keep+1), 8), 2*limit)
	names := make([]string, size)
	copy(names, h.view()[n-keep:])
	names[keep] = name
	b := &historyBuf{names: names}
	b.used.Store(int32(keep + 1))
	return History{buf: b, hi: int32(keep + 1)}
}

// MarshalJSON encodes the entries as a JSON array ([] when empty).
func (h History) MarshalJSON() ([]byte, error) {
	v := h.view()
	if v == nil {
		v = []string{}
	}
	return json.Marshal(v)
}

// UnmarshalJSON decodes a JSON array of strings (null: empty).
func (h *History) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	*h = History{}
	if len(names) > 0 {
		*h = adopt(names)
	}
	return nil
}

// String formats the entries as fmt formats a []string.
func (h History) String() string { return fmt.Sprint(h.view()) }
