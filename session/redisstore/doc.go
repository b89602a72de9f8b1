// Package redisstore is the session store in Redis (one server, Sentinel or
// Cluster), shared by every replica of a deployment: a session.Store.
//
// # Choosing a store
//
// Open takes a URL: "" or memory:// for the memory store; redis://,
// rediss://, redis+sentinel://h1:26379,h2:26379/master[/db] or
// redis+cluster://h1:7000,h2:7001 for Redis (query parameters prefix,
// dial_timeout, read_timeout, write_timeout). ConfigFromEnv reads the same
// from the environment:
//
//	REDIS_URL                 a URL of any form above
//	REDIS_SENTINEL_MASTER     Sentinel master name, with
//	REDIS_SENTINEL_ADDRS      comma-separated Sentinel host:port list
//	REDIS_CLUSTER_ADDRS       comma-separated Cluster seed host:port list
//	REDIS_USERNAME, REDIS_PASSWORD   credentials for Sentinel and Cluster
//	REDIS_PREFIX              key prefix (default orchestration-state)
//	REDIS_DIAL_TIMEOUT, REDIS_READ_TIMEOUT, REDIS_WRITE_TIMEOUT
//	                          Go durations (default 1s each)
//	SESSION_TTL_SECONDS       sliding session TTL (default 86400)
//
// # Redis layout
//
// A session is three keys in one Cluster slot: PREFIX:{key}:state (a hash
// with the version and the Session JSON), PREFIX:{key}:messages (a list of
// chat.Message JSON) and PREFIX:{key}:lease (the turn lease's token). Every
// access slides the TTL of the state and the history together; the lease
// has its own, Config.LockTTL.
//
// The owners' quotas (session.Config.SessionsPerOwner, BytesPerOwner)
// count an index per owner, PREFIX:owner:{D}:sessions and :bytes: the
// owner's sessions by expiry and the bytes written to each. A session's
// first write is followed by its admission to that index (one more round
// trip; a session over a quota is deleted again); the bytes of later
// writes are added in batches (see owners.go for what it counts late).
//
// What owners spend on models (session.Ledger) is counted in two hashes
// per owner, PREFIX:spend:{D}:d:DAY and :m:MONTH, added to by one script
// per model call (spend.go).
//
// # A turn's start
//
// Store is a session.Starter: ClaimStart claims the session and records
// the turn's first write in one script when it knows what the session is,
// because it is about to create it or because this process wrote it last
// (it remembers up to 4,096 sessions, 8 MiB). The script makes the write
// only if the session's last write is the one remembered, by its nonce,
// so a session another replica wrote since costs one more round trip,
// never a lost write.
//
// # Failures
//
// Errors wrap session.ErrUnavailable when Redis cannot be reached (a call
// fails within about the sum of its configured timeouts) and
// session.ErrCorrupt when a stored value cannot be decoded. A write whose
// round trip failed after it may have reached Redis is resent, with the
// nonce that lets its script recognise an earlier success, for
// Config.WriteRetry; one that stays unknown wraps session.ErrMaybeApplied.
// The store reconnects by itself when Redis is back.
package redisstore
