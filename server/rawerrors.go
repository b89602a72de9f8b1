package server

import (
	"bytes"
	"net"
	"strconv"
	"strings"
)

// net/http answers some malformed requests itself, before any handler
// runs: headers over MaxHeaderBytes (431), a bad request line, Host or
// header (400), an unsupported transfer encoding (501), an unknown HTTP
// version (505). It writes those answers in plain text, straight to the
// connection, in one write of the form
//
//	HTTP/1.1 <status>\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n<status>[: detail]
//
// jsonErrorListener rewrites exactly that write into the API's JSON error
// (with OpenAI's type and param too, as the path is unknown then), so that
// every error a client of this server gets is JSON with a code. Answers of
// handlers never match: net/http writes their headers in sorted order,
// where Connection comes before Content-Type.
type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

type jsonErrorConn struct{ net.Conn }

// CloseWrite keeps the TCP half-close net/http uses after an error answer.
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

var rawErrorHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if out, ok := rawErrorJSON(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rawErrorJSON returns the JSON answer for one of net/http's plain-text
// error writes, or false when p is anything else.
func rawErrorJSON(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 3 || (rest[0] != '4' && rest[0] != '5') {
		return nil, false
	}
	statusLine, body, ok := bytes.Cut(rest, rawErrorHeaders)
	if !ok || len(statusLine) < 4 || statusLine[3] != ' ' {
		return nil, false
	}
	status, err := strconv.Atoi(string(statusLine[:3]))
	if err != nil {
		return nil, false
	}
	// body is "<code> <text>[: <detail>]", or a detail alone.
	msg := strings.TrimSpace(string(bytes.TrimPrefix(body, statusLine[:4])))
	if msg == "" {
		msg = string(statusLine[4:])
	}
	code := "bad_request"
	switch status {
	case 408:
		code = "request_timeout"
	case 413:
		code = "body_too_large"
	case 417:
		code = "expectation_failed"
	case 431:
		code = "headers_too_large"
		msg = "the request's headers are too large"
	case 501:
		code = "not_implemented"
	case 505:
		code = "http_version_not_supported"
	}
	e := newError(0, code, "%s", msg)
	data := mustJSON(map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message, "type": "invalid_request_error", "param": nil}})
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 ")
	b.Write(statusLine)
	b.WriteString("\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ")
	b.WriteString(strconv.Itoa(len(data)))
	b.WriteString("\r\n\r\n")
	b.Write(data)
	return b.Bytes(), true
}
