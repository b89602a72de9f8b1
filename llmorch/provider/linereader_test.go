package provider

import (
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// TestLineReader reads the same lines whatever sizes the body's reads come
// in (the first bytes go through the reader's head, the rest through a
// pooled buffer), and a reader whose buffer came back from the pool reads
// its own lines.
func TestLineReader(t *testing.T) {
	long := strings.Repeat("z", 10<<10)
	body := "data: one\r\n\n: comment\ndata: " + long + "\n" + strings.Repeat("w", 100) + "\nlast\n"
	want := []string{"data: one", "", ": comment", "data: " + long, strings.Repeat("w", 100), "last"}
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"whole", func() io.Reader { return strings.NewReader(body) }},
		{"byte at a time", func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }},
		{"half", func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) }},
		{"data then EOF", func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 3 { // the pool's buffers come back dirty
				lr := newLineReader(tc.r())
				var got []string
				for {
					line, err := lr.next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, string(line))
				}
				lr.release()
				if !slices.Equal(got, want) {
					t.Fatalf("lines %q, want %q", got, want)
				}
			}
		})
	}
	t.Run("waits without a buffer", func(t *testing.T) {
		// A paced stream: each read brings one event.
		pr, pw := io.Pipe()
		lr := newLineReader(pr)
		defer lr.release()
		go func() {
			for _, ev := range []string{"data: {\"role\":\"assistant\"}\n\n", "data: " + strings.Repeat("x", 200) + "\n\n"} {
				pw.Write([]byte(ev))
			}
			pw.Close()
		}()
		for _, want := range []string{`data: {"role":"assistant"}`, "", "data: " + strings.Repeat("x", 200), ""} {
			line, err := lr.next()
			if err != nil || string(line) != want {
				t.Fatalf("next = %q, %v; want %q", line, err, want)
			}
		}
		// Every line read: the reader holds the head alone until the next
		// bytes come.
		if _, err := lr.next(); err != io.EOF {
			t.Fatalf("next at the end: %v, want EOF", err)
		}
		if lr.r != nil {
			t.Fatal("the reader holds a buffer while it waits for the next bytes")
		}
	})
	t.Run("empty body", func(t *testing.T) {
		lr := newLineReader(strings.NewReader(""))
		defer lr.release()
		if _, err := lr.next(); err != io.EOF {
			t.Fatalf("next on an empty body: %v, want EOF", err)
		}
	})
}
