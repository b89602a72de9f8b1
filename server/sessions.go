package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/gin-gonic/gin"
)

// A caller's list of conversations (docs/api.md, "Conversations"): its
// sessions, newest first, from a store that lists them (session.Lister);
// a session is renamed with PATCH and deleted with DELETE. Like every
// session route, another owner's sessions are neither listed nor found.

// defaultListPage is the page size of GET /api/sessions without limit.
const defaultListPage = 50

type conversationView struct {
	ID        string    `json:"id"`
	Agent     string    `json:"agent"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

type conversationList struct {
	Sessions []conversationView `json:"sessions"`
	// Next is the cursor of the following page, absent at the end.
	Next string `json:"next,omitempty"`
}

func viewOf(s session.Summary) conversationView {
	return conversationView{ID: s.ID, Agent: s.Agent, Title: s.Title, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// listSessions serves GET /api/sessions?limit=N&cursor=C.
func (s *Server) listSessions(c *gin.Context) {
	lister, ok := s.cfg.Store.(session.Lister)
	if !ok {
		abortWith(c, newError(http.StatusNotImplemented, "not_supported", "this server's session store does not list sessions (it does not implement session.Lister)"))
		return
	}
	limit := defaultListPage
	if q := c.Query("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > session.MaxListPage {
			abortWith(c, newParamError(http.StatusBadRequest, "invalid_limit", "limit", "limit must be a whole number from 1 to %d, got %q", session.MaxListPage, q))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	page, err := lister.List(ctx, ownerOf(c), c.Query("cursor"), limit)
	if errors.Is(err, session.ErrBadCursor) {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_cursor", "cursor", "%s", err.Error()))
		return
	}
	if err != nil {
		e := storeError(err)
		if e.Status >= 500 {
			s.log.Error("listing sessions", "err", err)
		}
		abortWith(c, e)
		return
	}
	out := conversationList{Sessions: make([]conversationView, 0, len(page.Sessions)), Next: page.Next}
	for _, sum := range page.Sessions {
		out.Sessions = append(out.Sessions, viewOf(sum))
	}
	c.JSON(http.StatusOK, out)
}

// renameRequest is the body of PATCH /api/sessions/:id.
type renameRequest struct {
	Title *string `json:"title"`
}

// renameSession serves PATCH /api/sessions/:id {"title": "..."}: the
// session's name in lists; "" gives it back its first message.
func (s *Server) renameSession(c *gin.Context) {
	var body renameRequest
	if e := decodeJSON(c.Request, &body); e != nil {
		abortWith(c, e)
		return
	}
	if body.Title == nil {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_title", "title", `the body needs "title": the session's new name ("" for its first message)`))
		return
	}
	title, why := cleanTitle(*body.Title)
	if why != "" {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_title", "title", "%s", why))
		return
	}
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	noop := func(*orchestration.State) error { return nil }
	// The owner and agent only matter if the session expired since it
	// was read: the write then recreates it as the caller's, empty.
	stored, err := s.cfg.Store.Update(ctx, sess.ID, noop, session.WithTitle(title), session.WithOwner(sess.Owner), session.WithAgent(sess.Agent))
	if err != nil {
		e := storeError(err)
		if e.Status >= 500 {
			s.log.Error("renaming a session", "session", sess.ID, "err", err)
		}
		abortWith(c, e)
		return
	}
	msgs, _ := s.cfg.Store.Messages(ctx, sess.ID, 0)
	sum := session.SummaryOf(stored)
	sum.Title = session.TitleOf(stored.Title, msgs)
	c.JSON(http.StatusOK, viewOf(sum))
}

// cleanTitle is a title as stored: white space runs made one space, at
// most session.MaxTitle characters; why says what is wrong with one that
// cannot be.
func cleanTitle(t string) (string, string) {
	if !utf8.ValidString(t) {
		return "", "the title is not valid UTF-8"
	}
	if strings.ContainsFunc(t, func(r rune) bool { return unicode.IsControl(r) && !unicode.IsSpace(r) }) {
		return "", "the title has control characters"
	}
	t = strings.Join(strings.Fields(t), " ")
	if n := utf8.RuneCountInString(t); n > session.MaxTitle {
		return "", "the title is " + strconv.Itoa(n) + " characters; the limit is " + strconv.Itoa(session.MaxTitle)
	}
	return t, ""
}
