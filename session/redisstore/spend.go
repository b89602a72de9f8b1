package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
)

// What owners spend (session.Ledger) is two hashes per owner, in one
// Cluster slot, for the current UTC day and month:
//
//	PREFIX:spend:{D}:d:2026-11-26   fields tokens, input, cached, output,
//	PREFIX:spend:{D}:m:2026-11      cost and calls
//
// where D is the owner's digest (as its sessions' keys have it). A call's
// spending is added to both by one script, atomically: replicas that
// share the Redis share the counts, and none is lost to a race. A key
// expires a period after its own ends. An add whose round trip fails is
// not sent again (HINCRBY cannot tell a repeat): a count errs low rather
// than twice.

// spendKeys are the keys of owner's day and month of at.
func (r *Store) spendKeys(owner string, at time.Time) []string {
	tag := r.prefix + ":spend:{" + digestOf(owner) + "}:"
	return []string{tag + "d:" + session.DayOf(at), tag + "m:" + session.MonthOf(at)}
}

var spendFields = []string{"tokens", "input", "cached", "output", "cost", "calls"}

// scriptSpend adds to the hashes KEYS: ARGV tokens, input, cached, output,
// cost, calls, then each key's expiry (Unix ms).
var scriptSpend = newScript(`
for i = 1, #KEYS do
  redis.call('HINCRBY', KEYS[i], 'tokens', ARGV[1])
  redis.call('HINCRBY', KEYS[i], 'input', ARGV[2])
  redis.call('HINCRBY', KEYS[i], 'cached', ARGV[3])
  redis.call('HINCRBY', KEYS[i], 'output', ARGV[4])
  if ARGV[5] ~= '0' then
    redis.call('HINCRBYFLOAT', KEYS[i], 'cost', ARGV[5])
  end
  redis.call('HINCRBY', KEYS[i], 'calls', ARGV[6])
  redis.call('PEXPIREAT', KEYS[i], ARGV[6 + i])
end
return 1
`)

// Spend adds s to owner's counts of the day and month of at
// (session.Ledger).
func (r *Store) Spend(ctx context.Context, owner string, at time.Time, s session.Spending) error {
	keys := r.spendKeys(owner, at)
	dayEnd, monthEnd := session.DayEnd(at), session.MonthEnd(at)
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	err := scriptSpend.Run(rctx, r.client, keys, s.Tokens, s.Input, s.CachedInput, s.Output,
		strconv.FormatFloat(s.Cost, 'g', -1, 64), s.Calls,
		dayEnd.Add(24*time.Hour).UnixMilli(), monthEnd.AddDate(0, 1, 0).UnixMilli()).Err()
	if err != nil {
		return r.fail("", "adding what an owner spent", err)
	}
	return nil
}

// Spent returns owner's counts of the day and month of at
// (session.Ledger).
func (r *Store) Spent(ctx context.Context, owner string, at time.Time) (day, month session.Spending, err error) {
	keys := r.spendKeys(owner, at)
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	var cmds []*redis.SliceCmd
	_, err = r.client.Pipelined(rctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			cmds = append(cmds, p.HMGet(rctx, k, spendFields...))
		}
		return nil
	})
	if err != nil {
		return day, month, r.fail("", "reading what an owner spent", err)
	}
	return spendingOf(cmds[0].Val()), spendingOf(cmds[1].Val()), nil
}

// spendingOf reads the fields of a spend hash (absent ones are zero).
func spendingOf(vals []any) session.Spending {
	num := func(i int) int64 {
		s, _ := vals[i].(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	cost, _ := vals[4].(string)
	c, _ := strconv.ParseFloat(cost, 64)
	return session.Spending{Tokens: num(0), Input: num(1), CachedInput: num(2), Output: num(3), Cost: c, Calls: num(5)}
}
