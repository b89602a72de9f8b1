package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestLineTransport: lines that are messages come out of Read in order;
// each line that is not one is answered on the output with a JSON-RPC
// error (its ID when it has a readable one) and skipped; the input's end
// is io.EOF.
func TestLineTransport(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`not json`,
		``,
		`  `,
		`[1]`,
		`42`,
		`{"jsonrpc":"1.0","id":"a","method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		"\xff\xfe",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, // no final newline
	}, "\n")
	var out bytes.Buffer
	conn, err := lineTransport{in: strings.NewReader(in), out: &out}.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var methods []string
	for {
		msg, err := conn.Read(t.Context())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		methods = append(methods, msg.(*jsonrpc.Request).Method)
	}
	if strings.Join(methods, ",") != "ping,notifications/initialized,tools/list" {
		t.Fatalf("messages %v", methods)
	}
	// Each error reply as "id code".
	var got []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r struct {
			JSONRPC string `json:"jsonrpc"`
			ID      any    `json:"id"`
			Error   struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("output line %q (%v)", sc.Text(), err)
		}
		got = append(got, fmt.Sprint(r.ID, " ", r.Error.Code))
	}
	want := []string{"<nil> -32700", "<nil> -32600", "<nil> -32600", "a -32600", "<nil> -32600", "<nil> -32700"}
	if !slices.Equal(got, want) {
		t.Fatalf("error replies %q, want %q", got, want)
	}
}

// TestLineTransportLongLine: a line over MaxStdioLine is skipped unread
// and answered; the next line is read.
func TestLineTransportLongLine(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("a", MaxStdioLine) + "\"}\n" +
		`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"
	var out bytes.Buffer
	conn, _ := lineTransport{in: strings.NewReader(in), out: &out}.Connect(t.Context())
	defer conn.Close()
	msg, err := conn.Read(t.Context())
	if err != nil || msg.(*jsonrpc.Request).Method != "ping" {
		t.Fatalf("after the long line: %v, %v", msg, err)
	}
	if !strings.Contains(out.String(), `"code":-32600`) || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("output %q", out.String())
	}
}

// FuzzLineTransport: any input yields messages and error replies, one
// reply a line, never a panic, and ends with io.EOF.
func FuzzLineTransport(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "x\n[]\n\"s\"\n", "{\"jsonrpc\":\"2.0\",\"id\":null}\n\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var out bytes.Buffer
		conn, _ := lineTransport{in: strings.NewReader(in), out: &out}.Connect(context.Background())
		defer conn.Close()
		for {
			_, err := conn.Read(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("reply %q is not JSON", line)
			}
		}
	})
}
