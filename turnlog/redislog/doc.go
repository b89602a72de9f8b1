// Package redislog is the turn log in Redis that the replicas of a
// deployment share (a turnlog.Log): one Redis Stream per turn, so that a
// client can resume a turn's stream on any replica, and a replica that
// finds a turn's writer dead can read what the turn streamed.
package redislog
