package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/session"
	"github.com/redis/go-redis/v9"
)

// Config configures the Redis store. Exactly one of URL, Sentinel
// (SentinelMaster with SentinelAddrs) and Cluster (ClusterAddrs) is set.
type Config struct {
	session.Config

	// URL is a redis:// or rediss:// URL of one server:
	// redis://[user:password@]host:port[/db].
	URL string

	// SentinelMaster and SentinelAddrs select a Sentinel-managed master.
	SentinelMaster string
	SentinelAddrs  []string
	// DB is the database of a Sentinel master (Cluster has only 0; a URL
	// carries its own).
	DB int

	// ClusterAddrs are the seed nodes of a Redis Cluster.
	ClusterAddrs []string

	// Username and Password authenticate with Sentinel masters and Cluster
	// nodes (a URL carries its own).
	Username string
	Password string
	// TLS, when set, is used for Sentinel and Cluster connections (rediss://
	// URLs turn TLS on by themselves).
	TLS *tls.Config

	// Prefix starts every key (default "orchestration-state").
	Prefix string

	// Timeouts of one connection attempt and of one command's read and
	// write (default 1 s each). A call fails with session.ErrUnavailable after about
	// DialTimeout+ReadTimeout+WriteTimeout per round trip when Redis does not
	// answer.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration

	// WaitReplicas is how many replicas must acknowledge a turn's claim
	// and its last write (Redis WAIT) before the store returns: 0 means
	// every replica the primary has when the store opens (in a Cluster,
	// every replica of the shard the session's slot is in), so that a
	// failover promoting any of them keeps the write, and none without
	// replicas; a negative value never waits. A last write that is not
	// acknowledged within WaitTimeout (default 1 s) is kept on the primary
	// and returned with an error wrapping session.ErrNotReplicated: a
	// failover before the replicas catch up may lose it.
	WaitReplicas int
	WaitTimeout  time.Duration
}

// DefaultPrefix starts the Redis keys unless Config.Prefix says
// otherwise.
const DefaultPrefix = "orchestration-state"

// DefaultTimeout is the default of each of Config's timeouts.
const DefaultTimeout = time.Second

// The URL schemes Open and ParseURL accept besides redis:// and rediss://.
const (
	schemeSentinel    = "redis+sentinel"
	schemeSentinelTLS = "rediss+sentinel"
	schemeCluster     = "redis+cluster"
	schemeClusterTLS  = "rediss+cluster"
)

// Open returns the store a URL names:
//
//	"" or memory://                                   the memory store
//	redis://[user:pass@]host:port[/db]                one Redis server
//	rediss://...                                      the same over TLS
//	redis+sentinel://[user:pass@]h1:26379,h2:26379/master[/db]
//	redis+cluster://[user:pass@]h1:7000,h2:7001
//
// (rediss+sentinel:// and rediss+cluster:// use TLS.) Every Redis form takes
// the query parameters prefix, dial_timeout, read_timeout and write_timeout
// (Go durations such as 500ms); fields set in cfg's Redis counterpart are not
// available here, use New for them. The Redis store is reachable when
// Open returns.
func Open(ctx context.Context, rawURL string, cfg session.Config) (session.Store, error) {
	if rawURL == "" || rawURL == "memory://" || rawURL == "memory:" {
		return session.NewMemory(cfg), nil
	}
	rc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	rc.Config = cfg
	return newStore(ctx, rc)
}

// ParseURL turns a Redis URL of any form that Open accepts into a
// Config (with a zero session.Config).
func ParseURL(rawURL string) (Config, error) {
	var rc Config
	u, err := url.Parse(rawURL)
	if err != nil {
		return rc, fmt.Errorf("session store URL: %w", redactURLError(err))
	}
	q := u.Query()
	rc.Prefix = q.Get("prefix")
	if q.Has("prefix") && rc.Prefix == "" {
		return rc, errors.New("session store URL: query parameter prefix is empty")
	}
	q.Del("prefix")
	switch u.Scheme {
	case "redis", "rediss":
		// go-redis validates the rest (host, db, its own query options).
		u.RawQuery = q.Encode()
		if _, err := redis.ParseURL(u.String()); err != nil {
			return rc, fmt.Errorf("session store URL %s: %w", redact(u), err)
		}
		rc.URL = u.String()
		return rc, nil
	case schemeSentinel, schemeSentinelTLS, schemeCluster, schemeClusterTLS:
	case "":
		return rc, fmt.Errorf("session store URL %q: missing scheme (want memory://, redis://, rediss://, redis+sentinel:// or redis+cluster://)", redact(u))
	default:
		return rc, fmt.Errorf("session store URL: unknown scheme %q (want memory://, redis://, rediss://, redis+sentinel:// or redis+cluster://)", u.Scheme)
	}

	for _, k := range []struct {
		name string
		dst  *time.Duration
	}{{"dial_timeout", &rc.DialTimeout}, {"read_timeout", &rc.ReadTimeout}, {"write_timeout", &rc.WriteTimeout}} {
		if !q.Has(k.name) {
			continue
		}
		d, err := time.ParseDuration(q.Get(k.name))
		if err != nil || d <= 0 {
			return rc, fmt.Errorf("session store URL %s: query parameter %s: want a positive duration such as 500ms, got %q", redact(u), k.name, q.Get(k.name))
		}
		*k.dst = d
		q.Del(k.name)
	}
	for k := range q {
		return rc, fmt.Errorf("session store URL %s: unknown query parameter %q (known: prefix, dial_timeout, read_timeout, write_timeout)", redact(u), k)
	}
	if u.User != nil {
		rc.Username = u.User.Username()
		rc.Password, _ = u.User.Password()
	}
	if strings.HasPrefix(u.Scheme, "rediss") {
		rc.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	addrs, err := splitAddrs(u.Host)
	if err != nil {
		return rc, fmt.Errorf("session store URL %s: %w", redact(u), err)
	}
	path := strings.Trim(u.Path, "/")
	if strings.HasSuffix(u.Scheme, "cluster") {
		if path != "" {
			return rc, fmt.Errorf("session store URL %s: a cluster URL has no path (Redis Cluster has only database 0), got %q", redact(u), u.Path)
		}
		rc.ClusterAddrs = addrs
		return rc, nil
	}
	parts := strings.Split(path, "/")
	if parts[0] == "" || len(parts) > 2 {
		return rc, fmt.Errorf("session store URL %s: want the path /mastername or /mastername/db, got %q", redact(u), u.Path)
	}
	rc.SentinelMaster, rc.SentinelAddrs = parts[0], addrs
	if len(parts) == 2 {
		db, err := strconv.Atoi(parts[1])
		if err != nil || db < 0 {
			return rc, fmt.Errorf("session store URL %s: database %q is not a non-negative number", redact(u), parts[1])
		}
		rc.DB = db
	}
	return rc, nil
}

// splitAddrs splits "h1:1,h2:2" and checks every host:port.
func splitAddrs(hosts string) ([]string, error) {
	if hosts == "" {
		return nil, errors.New("no host:port given")
	}
	var addrs []string
	for a := range strings.SplitSeq(hosts, ",") {
		a = strings.TrimSpace(a)
		h, p, err := net.SplitHostPort(a)
		if err != nil || h == "" {
			return nil, fmt.Errorf("address %q: want host:port", a)
		}
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("address %q: port %q is not a number from 1 to 65535", a, p)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// redact hides the password of a URL in messages.
func redact(u *url.URL) string { return u.Redacted() }

// redactURLError drops the URL (it may carry a password) from url.Parse's
// error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// ConfigFromEnv reads the Redis store's configuration from the
// environment; ok is false when none of REDIS_URL, REDIS_SENTINEL_MASTER and
// REDIS_CLUSTER_ADDRS is set (use the memory store then).
//
//	REDIS_URL               a URL of any form Open accepts
//	REDIS_SENTINEL_MASTER   Sentinel master name, with
//	REDIS_SENTINEL_ADDRS    comma-separated Sentinel host:port list
//	REDIS_CLUSTER_ADDRS     comma-separated Cluster seed host:port list
//	REDIS_USERNAME, REDIS_PASSWORD   credentials for Sentinel and Cluster
//	REDIS_PREFIX            key prefix (default orchestration-state)
//	REDIS_DIAL_TIMEOUT, REDIS_READ_TIMEOUT, REDIS_WRITE_TIMEOUT
//	                        Go durations (default 1s each)
//	SESSION_TTL_SECONDS     the sessions' sliding TTL (default 86400)
func ConfigFromEnv() (rc Config, ok bool, err error) {
	env := func(k string) string { return strings.TrimSpace(os.Getenv(k)) }
	rawURL, master, sentinels, cluster := env("REDIS_URL"), env("REDIS_SENTINEL_MASTER"), env("REDIS_SENTINEL_ADDRS"), env("REDIS_CLUSTER_ADDRS")
	set := 0
	for _, v := range []string{rawURL, master, cluster} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0 && sentinels == "":
		return rc, false, nil
	case set > 1:
		return rc, false, errors.New("REDIS_URL, REDIS_SENTINEL_MASTER and REDIS_CLUSTER_ADDRS: set only one of them")
	case rawURL != "":
		if rc, err = ParseURL(rawURL); err != nil {
			return rc, false, fmt.Errorf("REDIS_URL: %w", err)
		}
	case master != "":
		if rc.SentinelAddrs, err = splitAddrs(sentinels); err != nil {
			return rc, false, fmt.Errorf("REDIS_SENTINEL_ADDRS: %w", err)
		}
		rc.SentinelMaster = master
	case cluster != "":
		if rc.ClusterAddrs, err = splitAddrs(cluster); err != nil {
			return rc, false, fmt.Errorf("REDIS_CLUSTER_ADDRS: %w", err)
		}
	default:
		return rc, false, errors.New("REDIS_SENTINEL_ADDRS is set but REDIS_SENTINEL_MASTER is not")
	}
	if rawURL == "" {
		rc.Username, rc.Password = os.Getenv("REDIS_USERNAME"), os.Getenv("REDIS_PASSWORD")
	}
	if p := env("REDIS_PREFIX"); p != "" {
		rc.Prefix = p
	}
	for _, k := range []struct {
		name string
		dst  *time.Duration
	}{{"REDIS_DIAL_TIMEOUT", &rc.DialTimeout}, {"REDIS_READ_TIMEOUT", &rc.ReadTimeout}, {"REDIS_WRITE_TIMEOUT", &rc.WriteTimeout}} {
		v := env(k.name)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return rc, false, fmt.Errorf("%s: want a positive duration such as 500ms, got %q", k.name, v)
		}
		*k.dst = d
	}
	if rc.TTL, err = session.TTLFromEnv(); err != nil {
		return rc, false, err
	}
	return rc, true, nil
}

// universalOptions validates rc and builds the go-redis options.
func (rc Config) universalOptions() (*redis.UniversalOptions, error) {
	modes := 0
	if rc.URL != "" {
		modes++
	}
	if rc.SentinelMaster != "" || len(rc.SentinelAddrs) > 0 {
		modes++
		if rc.SentinelMaster == "" || len(rc.SentinelAddrs) == 0 {
			return nil, errors.New("redis session store: Sentinel needs both SentinelMaster and SentinelAddrs")
		}
	}
	if len(rc.ClusterAddrs) > 0 {
		modes++
	}
	if modes != 1 {
		return nil, fmt.Errorf("redis session store: set exactly one of URL, Sentinel (SentinelMaster+SentinelAddrs) and ClusterAddrs (%d set)", modes)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", rc.DialTimeout}, {"ReadTimeout", rc.ReadTimeout}, {"WriteTimeout", rc.WriteTimeout}} {
		if d.v < 0 {
			return nil, fmt.Errorf("redis session store: %s is negative (%v)", d.name, d.v)
		}
	}
	if rc.DB < 0 {
		return nil, fmt.Errorf("redis session store: DB is negative (%d)", rc.DB)
	}
	o := &redis.UniversalOptions{
		Username:  rc.Username,
		Password:  rc.Password,
		DB:        rc.DB,
		TLSConfig: rc.TLS,
		// Per-call deadlines of the caller are honoured, not only ours.
		ContextTimeoutEnabled: true,
		// A couple of quick retries replace the dead pooled connections
		// after a Redis restart; more would only hide a Redis that is down
		// behind a longer wait and a vaguer error. The scripts recognise a
		// retry of a write that was applied (see redis_scripts.go).
		MaxRetries:      2,
		MinRetryBackoff: 8 * time.Millisecond,
		MaxRetryBackoff: 64 * time.Millisecond,
		// go-redis's default (5 dials 100 ms apart) turns a refused
		// connection into a vague deadline error half a second later.
		DialerRetries:      1,
		DialerRetryTimeout: 20 * time.Millisecond,
		// Pipelines (the shared turn log batches its writes in them) run on
		// the main pool: go-redis's separate pipeline pool dials its own
		// connections at first use, each with 256 KiB of buffers, for
		// pipelines of a few small scripts.
		PipelinePoolSize: -1,
		// go-redis gives each pooled connection a 32 KiB reader and a
		// 32 KiB writer. This store's commands and replies are a few KiB
		// (a session's state, a batch of frames), and a larger value
		// passes the buffers by (bufio reads and writes it directly), so
		// 4 KiB each, net/http's size, serve as well: a pool grown to 20
		// connections by a burst of turns holds 160 KiB of buffers
		// instead of 1.25 MiB.
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 4 << 10,
	}
	switch {
	case rc.URL != "":
		po, err := redis.ParseURL(rc.URL)
		if err != nil {
			u, perr := url.Parse(rc.URL)
			if perr != nil {
				return nil, fmt.Errorf("redis session store URL: %w", redactURLError(perr))
			}
			return nil, fmt.Errorf("redis session store URL %s: %w", redact(u), err)
		}
		o.Addrs = []string{po.Addr}
		o.Username, o.Password, o.DB, o.TLSConfig = po.Username, po.Password, po.DB, po.TLSConfig
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = po.DialTimeout, po.ReadTimeout, po.WriteTimeout
	case rc.SentinelMaster != "":
		o.MasterName, o.Addrs = rc.SentinelMaster, rc.SentinelAddrs
		o.SentinelUsername, o.SentinelPassword = rc.Username, rc.Password
	default:
		o.Addrs, o.IsClusterMode = rc.ClusterAddrs, true
	}
	// Our fields win over the URL's query; 1 s when neither sets them.
	pick := func(ours, url time.Duration) time.Duration {
		switch {
		case ours > 0:
			return ours
		case url > 0:
			return url
		}
		return DefaultTimeout
	}
	o.DialTimeout = pick(rc.DialTimeout, o.DialTimeout)
	o.ReadTimeout = pick(rc.ReadTimeout, o.ReadTimeout)
	o.WriteTimeout = pick(rc.WriteTimeout, o.WriteTimeout)
	return o, nil
}
