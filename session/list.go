package session

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
)

// A Lister is a Store that lists an owner's sessions, newest first, for a
// person's list of conversations. It is optional: the server's list of
// conversations (GET /api/sessions) needs it, turns do not. The conformance
// suite checks it in a store that has it.
type Lister interface {
	Store
	// List returns a page of at most limit (1 to MaxListPage) of owner's
	// sessions, the most recently written first, after the cursor of the
	// previous page ("" for the first). A store lists at least the
	// MaxListed newest sessions of an owner that a Claim created.
	List(ctx context.Context, owner string, cursor string, limit int) (Page, error)
}

// List bounds.
const (
	// MaxListPage bounds one page of Lister.List.
	MaxListPage = 100
	// MaxListed is how many of an owner's sessions a Lister must keep in
	// its list; older ones may drop out of it (they are still sessions).
	MaxListed = 1000
	// MaxTitle bounds a Summary's title, in characters.
	MaxTitle = 200
)

// Summary is one session in a list.
type Summary struct {
	// Key is the session's store key (Key(owner, id)); ID is its ID.
	Key, ID string
	Agent   string
	// Title is the session's Title, or else its first user message, cut
	// to MaxTitle characters on one line.
	Title     string
	CreatedAt time.Time
	// UpdatedAt is the session's LastAccessed as the store keeps it: its
	// last write, or its last use in a store that counts reads (memory).
	UpdatedAt time.Time
}

// Page is one page of a list.
type Page struct {
	Sessions []Summary
	// Next is the cursor of the following page; "" at the end.
	Next string
}

// ErrBadCursor: a List cursor that no List returned.
var ErrBadCursor = errors.New("not a cursor of this list: pass the next cursor of the previous page, or none")

// ListPage is List for a store that has every summary of the owner at hand
// (title left empty): it sorts them newest first and returns the page
// after cursor; the caller fills the page's titles (TitleOf).
func ListPage(all []Summary, cursor string, limit int) (Page, error) {
	limit = min(max(limit, 1), MaxListPage)
	slices.SortFunc(all, func(a, b Summary) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), strings.Compare(a.Key, b.Key))
	})
	start := 0
	if cursor != "" {
		at, key, err := decodeCursor(cursor)
		if err != nil {
			return Page{}, err
		}
		start, _ = slices.BinarySearchFunc(all, Summary{Key: key, UpdatedAt: at}, func(a, b Summary) int {
			return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), strings.Compare(a.Key, b.Key))
		})
		if start < len(all) && all[start].Key == key && all[start].UpdatedAt.Equal(at) {
			start++
		}
	}
	end := min(start+limit, len(all))
	p := Page{Sessions: slices.Clone(all[start:end])}
	if end < len(all) {
		last := all[end-1]
		p.Next = encodeCursor(last.UpdatedAt, last.Key)
	}
	return p, nil
}

// A cursor is the sort key of the last summary of a page: the next page
// starts after it, wherever the sessions written since moved.
func encodeCursor(at time.Time, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixNano(), 10) + " " + key))
}

func decodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", ErrBadCursor
	}
	ns, key, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || !ValidKey(key) {
		return time.Time{}, "", ErrBadCursor
	}
	return time.Unix(0, n), key, nil
}

// SummaryOf summarises s, without its title.
func SummaryOf(s Session) Summary {
	return Summary{Key: s.ID, ID: IDOfKey(s.ID), Agent: s.Agent, CreatedAt: s.CreatedAt, UpdatedAt: s.LastAccessed}
}

// TitleOf is a session's title in a list: its Title, or else the first user
// message of its history (first), on one line and at most MaxTitle
// characters.
func TitleOf(title string, first []chat.Message) string {
	if title == "" {
		for _, m := range first {
			if m.Role == chat.RoleUser {
				title = m.Content
				break
			}
		}
	}
	title = strings.Join(strings.Fields(title), " ")
	if utf8.RuneCountInString(title) > MaxTitle {
		r := []rune(title)
		title = string(r[:MaxTitle-1]) + "…"
	}
	return title
}

// OwnerPrefix is what the keys of owner's sessions start with ("" when
// the owner is "": those keys are bare IDs, with no '.').
func OwnerPrefix(owner string) string {
	k := Key(owner, "x")
	return k[:len(k)-1]
}

// OwnsKey reports whether key is one of owner's session keys.
func OwnsKey(owner, key string) bool {
	if owner == "" {
		return !strings.Contains(key, ".")
	}
	return strings.HasPrefix(key, OwnerPrefix(owner))
}

// IDOfKey is the session ID of a store key.
func IDOfKey(key string) string {
	if _, id, ok := strings.Cut(key, "."); ok {
		return id
	}
	return key
}
