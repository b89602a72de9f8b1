// Package server is agentdock's HTTP server, on gin: the API under /api
// (the agents; the web chat's stream, POST /api/chat/:agentId, with its
// approvals and background runs; the sessions, their streams, stops and
// turns; the usage), health checks, metrics, the OpenAPI document and the
// chat page (package web), with the doors of the other protocols mounted
// beside them behind the same checks (package server/door: the
// OpenAI-compatible endpoints of server/openai, always served, and A2A,
// AG-UI and MCP as Config.Doors says). docs/api.md is its reference.
//
// It runs no turn itself: the turn runtime does (package turns,
// Config.Runtime; docs/turns.md), under a context of its own, so that a
// client that disconnects does not stop its turn. The web chat's stream is
// the AI SDK's UI message stream, mapped from each turn's chat.Event as it
// is written (uistream.go) and written as SSE by github.com/r3labs/sse/v2
// (stream.go; docs/design/sse.md): a client that reconnects with
// Last-Event-ID ("<turnId>:<n>") gets exactly the frames it missed, from
// any replica.
//
// The files, each one concern, in the order they build on each other (a
// file refers only to files before it, and to the Server of server.go that
// every file hangs its methods on; layout_test.go checks it):
//
//   - errors.go, config.go, security.go, rawerrors.go, otel.go: the API's
//     errors, the configuration, the request checks, telemetry of requests.
//   - uistream.go: the AI SDK's UI message stream, made from a turn's
//     events.
//   - stream.go: a connection's SSE stream of a turn, through r3labs;
//     idempotency.go: a chat request's idempotency key.
//   - the routes: chat.go (POST /api/chat, approvals), webhook.go
//     (background runs, their status and webhooks) and outbox.go (the
//     webhook calls owed, made by any replica), sessions.go and
//     resume.go (/api/sessions), info.go (/api/agents, /api/usage),
//     openapi.go.
//   - server.go: the Server, its routes and middleware, the doors,
//     serving and shutdown.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentdock-go/agentdock/outbox"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/server/openai"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/gin-gonic/gin"
	"github.com/r3labs/sse/v2"
)

// Server serves the HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	rt      *turns.Runtime
	engine  *gin.Engine // Handler: everything
	api     *gin.Engine // APIHandler: /api and /v1 only
	lingers lingers     // ends the r3labs sessions of live connections that wait
	sse     *sse.Server
	connSeq atomic.Int64 // names the connections' r3labs streams
	// recorders counts the Responses API recorders still storing a
	// response (responses.go); Shutdown waits for them after the turns.
	recorders sync.WaitGroup
	// webhookKey signs webhook calls (Config.WebhookSecret).
	webhookKey []byte
	// outbox makes the webhook calls (outbox.go); nil when the server
	// calls none.
	outbox *outbox.Outbox

	// origins is the CORS allowlist; anyOrigin is "*".
	origins   map[string]bool
	anyOrigin bool
	// crossOrigin refuses cross-site requests from origins not in it.
	crossOrigin *http.CrossOriginProtection
	// doorRoutes are the routes of Config.Doors.
	doorRoutes []door.Route
	// started is when the server was made: the agents' "created" time on
	// /v1/models (they were loaded then).
	started time.Time
}

var ginMode sync.Once

// New validates cfg and builds the server.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ginMode.Do(func() { gin.SetMode(gin.ReleaseMode) })
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		rt:      cfg.Runtime,
		started: time.Now(),
	}
	if cfg.WebhookSecret != "" {
		k, err := webhookSecret(cfg.WebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("server: WebhookSecret: %w", err)
		}
		s.webhookKey = k
	}
	compactionKey := wire.CompactionKey(cfg.CompactionSecret)
	if cfg.CompactionSecret == "" {
		compactionKey = make(wire.CompactionKey, 32)
		_, _ = rand.Read(compactionKey)
	}
	if cfg.WebhookURL != "" {
		if err := s.checkWebhook("", cfg.WebhookURL); err != nil {
			return nil, fmt.Errorf("server: WebhookURL: %w", err)
		}
	}
	if err := s.startOutbox(); err != nil {
		return nil, err
	}
	s.crossOrigin = http.NewCrossOriginProtection()
	for _, o := range cfg.CORSOrigins {
		if o == "*" {
			s.anyOrigin = true
			continue
		}
		if s.origins == nil {
			s.origins = map[string]bool{}
		}
		o = strings.TrimSuffix(o, "/")
		s.origins[o] = true
		if err := s.crossOrigin.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("server: CORS origin %q: %w", o, err)
		}
	}
	s.sse = newSSE()
	// The OpenAI-compatible endpoints are a door of their own (package
	// server/openai), always served.
	oa, err := openai.New(openai.Config{
		Responses: cfg.Responses, Compactor: cfg.Compactor, Heartbeat: cfg.Heartbeat, MaxMessageBytes: cfg.MaxBodyBytes,
		Started: s.started, Telemetry: cfg.Telemetry, Logger: cfg.Logger, Webhook: s.openAIWebhook(), CompactionKey: compactionKey,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.cfg.Doors = append([]door.Door{oa}, cfg.Doors...)
	for _, d := range s.cfg.Doors {
		s.doorRoutes = append(s.doorRoutes, d.Routes(s.rt)...)
	}
	s.engine = s.routes(true)
	s.api = s.routes(false)
	return s, nil
}

// Handler returns the HTTP handler of everything the server serves: the
// API (/api, /v1), the chat page at / (when Config.WebFS is set), the health
// checks (/healthz, /readyz), /openapi.json and /metrics.
//
// It serves under any path prefix when mounted with http.StripPrefix: the
// page derives the API's location from its own URL.
//
//	mux.Handle("/agents/", http.StripPrefix("/agents", srv.Handler()))
func (s *Server) Handler() http.Handler { return s.engine }

// APIHandler returns the handler of the API alone, /api and /v1, for an
// embedder that has its own page, health checks and metrics. Every other
// path is answered with a JSON 404. It mounts like Handler.
func (s *Server) APIHandler() http.Handler { return s.api }

// ListenAndServe listens on addr and serves until ctx is cancelled, then
// shuts down gracefully (see Serve).
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: listening on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is cancelled. Then it shuts down within
// Config.ShutdownTimeout: new turns are refused (503), running turns are
// cancelled (their partial answers are saved and their streams get an error
// frame "server_shutdown", the finish frame and [DONE]), every other open
// stream gets the same closing frames, and the listener is closed. The
// http.Server's WriteTimeout is not set for streams: each stream clears its
// own write deadline.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: min(10*time.Second, s.cfg.ReadTimeout),
		// ReadTimeout bounds the head and body of every request; each
		// request clears it once its body is read (readDeadline), so that
		// it never cuts a stream: past it, net/http's background read would
		// fail and cancel the request's context.
		ReadTimeout:  s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	var unused unusedConns
	srv.ConnState = unused.track
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(jsonErrorListener{ln}) }()
	select {
	case err := <-errc:
		s.Shutdown(context.Background())
		return fmt.Errorf("server: serving: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	unused.closeAll()
	s.Shutdown(sctx)
	err := <-shut
	if err != nil {
		srv.Close()
		return fmt.Errorf("server: shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: serving: %w", err)
	}
	return nil
}

// unusedConns holds the connections that have not sent a byte yet
// (http.StateNew: a browser's preconnect, a spare in a client's pool).
// http.Server.Shutdown waits up to 5 s for each before it counts as idle;
// they carry no request, so Serve closes them as its shutdown starts, and
// any accepted after that at once.
type unusedConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// track is the http.Server's ConnState hook.
func (u *unusedConns) track(c net.Conn, st http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case st == http.StateNew && u.closed:
		_ = c.Close()
	case st == http.StateNew:
		if u.conns == nil {
			u.conns = make(map[net.Conn]struct{})
		}
		u.conns[c] = struct{}{}
	default:
		delete(u.conns, c)
	}
}

func (u *unusedConns) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for c := range u.conns {
		_ = c.Close()
	}
	clear(u.conns)
}

// Shutdown refuses new turns, hands the running ones over to the other
// replicas (a shared turn log) or waits for them and cancels them, waits
// for them (or ctx) and then ends every open stream with closing frames. It is what Serve
// does on shutdown; call it yourself when serving Handler with your own
// http.Server (from its RegisterOnShutdown, for example). The http.Server
// still has to be shut down.
func (s *Server) Shutdown(ctx context.Context) {
	if s.cfg.Outbox != nil {
		// Shared with the other replicas: the webhook calls this one
		// holds go to them at once, as its turns do.
		s.closeOutbox(ctx)
	}
	s.rt.Shutdown(ctx)
	// In this process only: the calls of the turns that ended meanwhile
	// had their chance.
	s.closeOutbox(ctx)
	if err := turns.WaitGroup(ctx, &s.recorders); err != nil {
		s.log.Warn("shutdown: responses still being stored", "err", err)
	}
	for _, d := range s.cfg.Doors {
		if c, ok := d.(door.Closer); ok {
			if err := c.Close(ctx); err != nil {
				s.log.Warn("shutdown: a door did not finish", "err", err)
			}
		}
	}
}

// Runtime returns the runtime the server's turns run on.
func (s *Server) Runtime() *turns.Runtime { return s.rt }

// routes builds the router; full adds the page, health checks, OpenAPI
// document and metrics to the API.
func (s *Server) routes(full bool) *gin.Engine {
	e := gin.New()
	e.HandleMethodNotAllowed = true
	// A redirect answers in HTML, and an API client that sent a trailing
	// slash wants to hear which endpoint it meant: not_found says so.
	e.RedirectTrailingSlash = false
	e.ContextWithFallback = true
	e.Use(s.recovery,
		traceRequests(s.cfg.Telemetry, append([]string{"/api/chat/:agentId", "/api/sessions/:id/stream", "/api/chat/:agentId/:id/stream", "/v1/chat/completions", "/v1/responses"}, s.doorPaths()...)...),
		s.logRequests, before(s.secureHeaders, s.cors, s.readDeadline))

	if full {
		e.GET("/healthz", s.healthz)
		e.GET("/readyz", s.readyz)
		e.GET("/openapi.json", s.openapi)
		if s.cfg.Telemetry != nil {
			if s.cfg.MetricsRequireOwner {
				e.GET("/metrics", s.identifyOnly, gin.WrapH(s.cfg.Telemetry.MetricsHandler()))
			} else {
				e.GET("/metrics", gin.WrapH(s.cfg.Telemetry.MetricsHandler()))
			}
		}
	}

	// Every refusal before the handler is answered without reading the
	// body: an unauthenticated or cross-site client learns at once, and a
	// body that never completes holds nothing but its own connection.
	guard := before(s.sameOrigin, s.identify, s.requireJSON, s.limitBody)
	api := e.Group("/api", guard)
	api.GET("/agents", s.listAgents)
	api.GET("/agents/:id", s.getAgent)
	api.POST("/chat/:agentId", s.postChat)
	api.GET("/chat/:agentId/:id/stream", s.resumeChat)
	api.GET("/sessions", s.listSessions)
	api.GET("/sessions/:id", s.getSession)
	api.PATCH("/sessions/:id", s.renameSession)
	api.DELETE("/sessions/:id", s.deleteSession)
	api.GET("/sessions/:id/stream", s.resumeStream)
	api.POST("/sessions/:id/stop", s.stopTurn)
	api.GET("/sessions/:id/turns/:turnId", s.getTurn)
	api.GET("/usage", s.getUsage)

	s.mountDoors(e, guard)

	if full {
		e.NoRoute(s.noRoute)
	} else {
		e.NoRoute(s.notFound)
	}
	e.NoMethod(func(c *gin.Context) {
		abortWith(c, newError(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed on %s", c.Request.Method, clientPath(c.Request)))
	})
	return e
}

// recovery turns a panic into a 500 JSON answer (or, when the response
// already started, ends it) and logs it; the process goes on.
func (s *Server) recovery(c *gin.Context) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		s.log.Error("panic in handler", "route", c.FullPath(), "panic", fmt.Sprint(v))
		if c.Writer.Written() {
			c.Abort()
			return
		}
		abortWith(c, newError(http.StatusInternalServerError, "internal_error", "the server failed to handle the request"))
	}()
	c.Next()
}

// check is a step before the handler: it lets the request through (true)
// or answers it (false).
type check func(*gin.Context) bool

// before runs checks in order, then the rest of the chain, in one
// middleware. A stream's handler waits at the bottom of the chain for as
// long as the stream lasts, and every middleware is a frame on its stack
// above it. Writing the response's headers grows the handler's stack to
// 16 KiB; the runtime halves a stack at a collection only while less than
// a quarter of it is in use, which the waiting handler's is (3.2 KiB) with
// one frame for the checks and was not with one frame per check.
func before(checks ...check) gin.HandlerFunc {
	return func(c *gin.Context) {
		for _, ok := range checks {
			if !ok(c) {
				return
			}
		}
		c.Next()
	}
}

// logRequests names every request and logs one record for it. The name is
// a well-formed X-Request-ID from the caller (a proxy's), else a new random
// one; it is returned in X-Request-ID and carried by every log record of
// the request. The record has no bodies, queries or headers, which may
// carry chat content or keys.
func (s *Server) logRequests(c *gin.Context) {
	nameRequest(c)
	start := time.Now()
	c.Next()
	s.logRequest(c, start)
}

func nameRequest(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if !session.ValidID(id) {
		id = session.NewID()
	}
	c.Header("X-Request-ID", id)
	c.Request = c.Request.WithContext(telemetry.WithLogAttrs(c.Request.Context(), slog.String("request_id", id)))
}

func (s *Server) logRequest(c *gin.Context, start time.Time) {
	route := c.FullPath()
	if route == "" {
		route = "(no route)"
	}
	s.log.LogAttrs(c.Request.Context(), slog.LevelInfo, "http request",
		slog.String("method", c.Request.Method), slog.String("route", route),
		slog.Int("status", c.Writer.Status()), slog.Duration("duration", time.Since(start)),
		slog.Int("bytes", c.Writer.Size()))
}

// readDeadline clears the connection's read deadline (Serve's
// ReadTimeout) as soon as the request's body is read: at once for a request
// without one, at the body's end otherwise. A slow body is still cut at the
// deadline, and nothing after it (a stream, a long wait for a turn) is.
func (s *Server) readDeadline(c *gin.Context) bool {
	rc := http.NewResponseController(c.Writer)
	clear := func() { _ = rc.SetReadDeadline(time.Time{}) }
	if c.Request.Body == nil || c.Request.Body == http.NoBody || c.Request.ContentLength == 0 {
		clear()
	} else {
		c.Request.Body = &clearOnEOF{ReadCloser: c.Request.Body, clear: clear}
	}
	return true
}

// clearOnEOF calls clear once its body is read to the end.
type clearOnEOF struct {
	io.ReadCloser
	clear func()
	done  bool
}

func (b *clearOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.clear()
	}
	return n, err
}

// refuse answers e before the body was read. The connection is closed
// after the answer, so that net/http does not wait for the rest of a body
// (it drains up to 256 KiB of an unread body to reuse the connection, which
// a client that never sends it would hold).
func refuse(c *gin.Context, e *apiError) {
	if c.Request.ContentLength != 0 {
		c.Header("Connection", "close")
	}
	abortWith(c, e)
}

// sameOrigin refuses state-changing requests that a browser sent from
// another site (Sec-Fetch-Site, else Origin against Host: Go's
// http.CrossOriginProtection), unless CORSOrigins allows that origin.
// Without it any web page could start turns with a "simple" cross-site
// POST that needs no preflight. Clients that are not browsers send
// neither header and pass.
func (s *Server) sameOrigin(c *gin.Context) bool {
	if s.anyOrigin {
		return true
	}
	if err := s.crossOrigin.Check(c.Request); err != nil {
		refuse(c, newError(http.StatusForbidden, "cross_origin_denied", "requests from the origin %q are not allowed; a page on another site needs its origin in CORS_ORIGINS", c.GetHeader("Origin")))
		return false
	}
	return true
}

// requireJSON refuses POST and PATCH bodies that are not declared JSON (415): the
// API reads JSON only, and a text/plain body is what a cross-site form or
// fetch can send without a preflight.
func (s *Server) requireJSON(c *gin.Context) bool {
	if c.Request.Method != http.MethodPost && c.Request.Method != http.MethodPatch || c.Request.ContentLength == 0 {
		return true
	}
	ct := c.GetHeader("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		refuse(c, newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be JSON sent with Content-Type: application/json, not %q", ct))
		return false
	}
	return true
}

// limitBody bounds the request body; reading past the limit fails with
// *http.MaxBytesError, answered 413.
func (s *Server) limitBody(c *gin.Context) bool {
	if c.Request.ContentLength > s.cfg.MaxBodyBytes {
		refuse(c, newError(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over the limit of %d bytes", s.cfg.MaxBodyBytes))
		return false
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.MaxBodyBytes)
	return true
}

const ownerKey = "agentdock.owner"

// identify runs the Owner hook and the Limiter.
func (s *Server) identify(c *gin.Context) bool {
	owner, ok := s.owner(c)
	if !ok {
		return false
	}
	c.Set(ownerKey, owner)
	if s.cfg.Limiter != nil {
		if ok, retry := s.cfg.Limiter.Allow(c.Request, owner); !ok {
			e := newError(http.StatusTooManyRequests, "rate_limited", "too many requests; slow down")
			e.RetryAfter = retry
			abortWith(c, e)
			return false
		}
	}
	return true
}

// identifyOnly runs the Owner hook without the Limiter.
func (s *Server) identifyOnly(c *gin.Context) {
	if _, ok := s.owner(c); ok {
		c.Next()
	}
}

// owner runs the Owner hook; a refusal is answered 401 with a Bearer
// challenge (RFC 6750) and ok is false. An address that failed too often
// (AuthThrottle) is answered 429 before its key is checked.
func (s *Server) owner(c *gin.Context) (owner string, ok bool) {
	if s.cfg.Owner == nil {
		return "", true
	}
	if t := s.cfg.AuthThrottle; t != nil {
		if blocked, retry := t.Blocked(c.Request); blocked {
			e := newError(http.StatusTooManyRequests, "auth_rate_limited", "too many failed authentications from this address; wait for Retry-After before trying again")
			e.RetryAfter = retry
			refuse(c, e)
			return "", false
		}
	}
	o, err := s.cfg.Owner(c.Request)
	if err != nil {
		if t := s.cfg.AuthThrottle; t != nil {
			t.Failed(c.Request)
		}
		c.Header("WWW-Authenticate", `Bearer realm="agentdock"`)
		refuse(c, newError(http.StatusUnauthorized, "unauthorized", "%s", err.Error()))
		return "", false
	}
	return o, true
}

func ownerOf(c *gin.Context) string { return c.GetString(ownerKey) }

// noRoute serves the page's files; API paths get the JSON 404.
func (s *Server) noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	if s.cfg.WebFS == nil || p == "/api" || p == "/v1" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") ||
		(c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead) {
		s.notFound(c)
		return
	}
	http.FileServerFS(s.cfg.WebFS).ServeHTTP(c.Writer, c.Request)
}

func (s *Server) notFound(c *gin.Context) {
	abortWith(c, newError(http.StatusNotFound, "not_found", "no endpoint %s %s", c.Request.Method, clientPath(c.Request)))
}

// clientPath is the path as the client sent it: under http.StripPrefix the
// URL's path has lost the prefix the client knows.
func clientPath(r *http.Request) string {
	if p, _, _ := strings.Cut(r.RequestURI, "?"); strings.HasPrefix(p, "/") {
		return p
	}
	return r.URL.Path
}

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (s *Server) readyz(c *gin.Context) {
	if s.rt.Draining() {
		abortWith(c, newError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down"))
		return
	}
	if p, ok := s.rt.Store().(session.Pinger); ok {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			s.log.Warn("readiness: session store ping failed", "err", err)
			abortWith(c, turns.ErrStoreDown())
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

// mountDoors adds the doors' routes to e behind guard.
func (s *Server) mountDoors(e *gin.Engine, guard gin.HandlerFunc) {
	for _, d := range s.doorRoutes {
		h := d.Handler
		serve := func(c *gin.Context) {
			r := c.Request.WithContext(door.WithOwner(c.Request.Context(), ownerOf(c)))
			for _, p := range c.Params {
				r.SetPathValue(p.Key, p.Value)
			}
			h.ServeHTTP(c.Writer, r)
		}
		if d.Method == "*" {
			e.Any(d.Path, guard, serve)
		} else {
			e.Handle(d.Method, d.Path, guard, serve)
		}
	}
}

// doorPaths are the doors' route patterns: every door may stream, so none
// gets a request span (traceRequests).
func (s *Server) doorPaths() []string {
	var out []string
	for _, r := range s.doorRoutes {
		out = append(out, r.Path)
	}
	return out
}
