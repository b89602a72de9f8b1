// Package netguard tells where a server may reach on a user's behalf. A
// URL a user gives for others to fetch may point at public addresses
// only (CheckURL); a webhook may be posted to the hosts and ports of an
// allow-list only (HostAllowed).
//
// Public addresses: A URL a user gives (an
// image's, which the model's provider fetches) must not reach the
// machines beside the server: loopback, private and link-local networks,
// a cloud's metadata service (169.254.169.254, fd00:ec2::254), a
// self-hosted provider's own host. A host name counts by every address it
// resolves to now; what it resolves to when it is fetched later is the
// fetcher's to check again (DNS rebinding).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up a host's addresses (net.DefaultResolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// nonPublic are the networks no URL of a user may point into, beyond
// what netip.Addr's own predicates tell (loopback, private, link-local,
// multicast, unspecified).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: an IPv4 address behind it
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments (Teredo...)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: an IPv4 address inside
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// Public reports whether addr is a public unicast address.
func Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// lookupTimeout bounds CheckURL's resolution of a host.
const lookupTimeout = 5 * time.Second

// ErrNotPublic is wrapped by CheckURL's error for a URL whose host is, or
// resolves to, an address that is not public.
var ErrNotPublic = errors.New("not a public address")

// CheckURL allows an https URL without credentials whose host is a public
// address, or a name that resolves (by r) to public addresses only. Its
// error says what is wrong, for the user who sent the URL.
func CheckURL(ctx context.Context, r Resolver, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("not an absolute URL")
	case !strings.EqualFold(u.Scheme, "https"):
		return fmt.Errorf("the scheme is %q; only https URLs are fetched", u.Scheme)
	case u.User != nil:
		return errors.New("the URL carries credentials")
	}
	host := u.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil {
		if !Public(addr) {
			return fmt.Errorf("the host %s is %w", host, ErrNotPublic)
		}
		return nil
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost") {
		return fmt.Errorf("the host %s is %w", host, ErrNotPublic)
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		var dns *net.DNSError
		if errors.As(err, &dns) && dns.IsNotFound {
			return fmt.Errorf("the host %s does not resolve", host)
		}
		return fmt.Errorf("the host %s could not be resolved: %w", host, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("the host %s does not resolve", host)
	}
	for _, a := range addrs {
		if !Public(a) {
			return fmt.Errorf("the host %s resolves to %s, which is %w", host, a.Unmap(), ErrNotPublic)
		}
	}
	return nil
}

// CheckHost checks an allow-list entry of hosts: "host" (a name or an
// IP address) or "host:port".
func CheckHost(entry string) error {
	host, port := entry, ""
	if h, p, err := net.SplitHostPort(entry); err == nil {
		host, port = h, p
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: the port must be 1 to 65535", entry)
		}
	}
	if host == "" || strings.ContainsAny(host, "/?#@ ") || strings.Contains(strings.Trim(host, "[]"), "[") {
		return fmt.Errorf("%q is not a host or host:port", entry)
	}
	return nil
}

// HostAllowed reports whether u's host and port are on the allow-list
// hosts: an entry "host:port" allows that port only, and a bare "host"
// its scheme's default port only (443 for https, 80 for http), so that
// allowing a receiver does not open every service of its machine.
func HostAllowed(u *url.URL, hosts []string) bool {
	host, port := u.Hostname(), u.Port()
	def := map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
	if port == "" {
		port = def
	}
	for _, h := range hosts {
		eh, ep, err := net.SplitHostPort(h)
		if err != nil {
			eh, ep = strings.Trim(h, "[]"), def
		}
		if ep != "" && ep == port && strings.EqualFold(eh, host) {
			return true
		}
	}
	return false
}
