package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// resolver answers from a table.
type resolver map[string][]string

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	list, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range list {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "93.184.215.14": true, "2606:4700::1111": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "fd00:ec2::254": false, "fe80::1": false, "0.0.0.0": false, "::": false,
		"100.64.0.1": false, "255.255.255.255": false, "224.0.0.1": false, "::ffff:127.0.0.1": false,
		"::ffff:169.254.169.254": false, "64:ff9b::a9fe:a9fe": false, "2002:a9fe:a9fe::1": false, "192.0.2.1": false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	r := resolver{
		"images.example.com": {"93.184.215.14"},
		"mixed.example.com":  {"93.184.215.14", "10.0.0.5"},
		"metadata.internal":  {"169.254.169.254"},
	}
	for _, tc := range []struct {
		url  string
		want string // "" allowed, else in the error
	}{
		{"https://images.example.com/cat.png", ""},
		{"https://93.184.215.14/cat.png", ""},
		{"http://169.254.169.254/latest/meta-data/", "only https"},
		{"http://images.example.com/cat.png", "only https"},
		{"https://169.254.169.254/latest/meta-data/", "not a public address"},
		{"https://[::1]:8443/x", "not a public address"},
		{"https://[::ffff:10.0.0.1]/x", "not a public address"},
		{"https://localhost/x", "not a public address"},
		{"https://api.localhost/x", "not a public address"},
		{"https://metadata.internal/x", "resolves to 169.254.169.254"},
		{"https://mixed.example.com/x", "resolves to 10.0.0.5"},
		{"https://nowhere.example.com/x", "does not resolve"},
		{"https://user:pw@images.example.com/x", "credentials"},
		{"ftp://images.example.com/x", "only https"},
		{"not a url", "not an absolute URL"},
		{"https:opaque", "not an absolute URL"},
	} {
		err := CheckURL(context.Background(), r, tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(tc.want, "public") && !errors.Is(err, ErrNotPublic) {
			t.Errorf("%s: %v does not wrap ErrNotPublic", tc.url, err)
		}
	}
}

func TestHostAllowed(t *testing.T) {
	hosts := []string{"hooks.example.com", "10.0.0.5:8443", "[::1]:9000", "plain.example.com:80"}
	for raw, want := range map[string]bool{
		"https://hooks.example.com/x":      true,
		"https://hooks.example.com:443/x":  true,
		"https://HOOKS.example.com/x":      true,
		"https://hooks.example.com:8443/x": false, // a bare host: its default port only
		"http://hooks.example.com/x":       true,  // port 80, http's default
		"http://hooks.example.com:443/x":   false,
		"https://10.0.0.5:8443/x":          true,
		"https://10.0.0.5/x":               false,
		"http://[::1]:9000/x":              true,
		"http://[::1]:9001/x":              false,
		"http://plain.example.com/x":       true,
		"https://plain.example.com/x":      false,
		"https://other.example.com/x":      false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := HostAllowed(u, hosts); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
	for entry, ok := range map[string]bool{"example.com": true, "example.com:8443": true, "10.0.0.1": true, "[::1]:80": true,
		"example.com:0": false, "example.com:99999": false, "http://example.com": false, "": false, "a b": false} {
		if err := CheckHost(entry); (err == nil) != ok {
			t.Errorf("CheckHost(%q): %v", entry, err)
		}
	}
}

// FuzzCheckURL: whatever URL a user sends, CheckURL does not panic, and
// one it allows is https to a public address (a name resolving to
// 93.184.215.14 here).
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://images.example.com/a.png", "http://169.254.169.254/", "https://[::ffff:127.0.0.1]/", "https://0x7f.1/", "https://user@host/", "https://%31%32%37.0.0.1/"} {
		f.Add(s)
	}
	r := resolver{"images.example.com": {"93.184.215.14"}}
	f.Fuzz(func(t *testing.T, raw string) {
		if CheckURL(context.Background(), r, raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || !strings.EqualFold(u.Scheme, "https") {
			t.Fatalf("%q allowed", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && !Public(a) {
			t.Fatalf("%q allowed: %s is not public", raw, a)
		}
		if _, known := r[u.Hostname()]; !known {
			if _, err := netip.ParseAddr(u.Hostname()); err != nil {
				t.Fatalf("%q allowed: %q resolves to nothing", raw, u.Hostname())
			}
		}
	})
}
