package locker

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed obtain_each.lua
	obtainEachLua    string
	obtainEachScript = redis.NewScript(obtainEachLua)

	//go:embed release_each.lua
	releaseEachLua    string
	releaseEachScript = redis.NewScript(releaseEachLua)
)

// Each names one lock of ObtainEach: its key, the token of its holder and its
// time to live.
type Each struct {
	Key   string
	Token string
	TTL   time.Duration
}

// ObtainEach takes or extends many single-key locks, each on its own: lock i
// is each[i].Key under each[i].Token, set when the key is free and given
// each[i].TTL when it already holds that token (reentrant, as Obtain with a
// Token). It returns one entry per request, in order: the lock, or nil when
// another token holds the key.
//
// It is one script per Redis whatever the number of locks (on a Cluster, one
// per hash slot in one pipeline, which the client sends to the masters in
// parallel). With Redlock each master runs it at once; a lock counts as
// obtained when a quorum set it in time, and masters outside the quorum give
// it back.
//
// An error means some of the script runs failed; the locks of those that did
// not are returned all the same, and a key set by a failed run may be held
// until its time to live passes. Requests need a key, a token and a time to
// live of at least MinTTL; keys must be distinct.
func (c *Client) ObtainEach(ctx context.Context, each []Each) ([]*Lock, error) {
	seen := make(map[string]bool, len(each))
	for _, e := range each {
		switch {
		case e.Key == "":
			return nil, errors.New("locker: obtain each: empty key")
		case e.Token == "":
			return nil, fmt.Errorf("locker: obtain each %q: empty token", e.Key)
		case e.TTL < MinTTL:
			return nil, fmt.Errorf("locker: obtain each %q: ttl must be at least %v, got %v", e.Key, MinTTL, e.TTL)
		case seen[e.Key]:
			return nil, fmt.Errorf("locker: obtain each: key %q appears twice", e.Key)
		}
		seen[e.Key] = true
	}
	locks := make([]*Lock, len(each))
	if len(each) == 0 {
		return locks, nil
	}
	shortest := each[0].TTL
	for _, e := range each {
		shortest = min(shortest, e.TTL)
	}
	start := time.Now()
	var (
		mu     sync.Mutex
		votes  = make([]int, len(each))
		got    = make([][]bool, len(c.nodes))
		errs   []error
		closed bool // answers after each returned are dropped
	)
	c.each(ctx, min(c.nodeTimeout, shortest/3), func(ctx context.Context, i int, n *node) (int, error) {
		ok, err := n.obtainEach(ctx, each)
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return 0, err
		}
		got[i] = ok
		for k, o := range ok {
			if o {
				votes[k]++
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		return 0, err
	})
	mu.Lock()
	closed = true
	mu.Unlock()

	now := time.Now()
	var undo []bool // per request: give it back where it was set
	for k, e := range each {
		until := start.Add(e.TTL - drift(e.TTL))
		if votes[k] >= c.quorum && now.Before(until) {
			locks[k] = c.newLock([]string{e.Key}, e.Token, until)
			continue
		}
		if votes[k] > 0 {
			if undo == nil {
				undo = make([]bool, len(each))
			}
			undo[k] = true
		}
	}
	if undo != nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		c.each(cctx, c.nodeTimeout, func(ctx context.Context, i int, n *node) (int, error) {
			var keys [][]string
			var tokens []string
			for k, u := range undo {
				if u && k < len(got[i]) && got[i][k] {
					keys = append(keys, []string{each[k].Key})
					tokens = append(tokens, each[k].Token)
				}
			}
			if len(keys) == 0 {
				return 0, nil
			}
			_, err := n.releaseEach(ctx, keys, tokens)
			return 0, err
		})
	}
	if len(errs) > 0 {
		return locks, fmt.Errorf("locker: obtain each: %w", errors.Join(errs...))
	}
	return locks, nil
}

// obtainEach runs obtain_each.lua for each on this node and reports which
// locks it holds now. A group whose script failed reports none.
func (n *node) obtainEach(ctx context.Context, each []Each) ([]bool, error) {
	keys := make([]string, len(each))
	for i, e := range each {
		keys[i] = e.Key
	}
	gs := n.groups(keys)
	args := func(g int) ([]string, []any) {
		a := make([]any, 0, 2*len(gs[g].pos))
		for _, p := range gs[g].pos {
			a = append(a, each[p].Token, each[p].TTL.Milliseconds())
		}
		return gs[g].keys, a
	}
	cmds := n.runGroups(ctx, obtainEachScript, len(gs), args)
	ok := make([]bool, len(each))
	var firstErr error
	for g, cmd := range cmds {
		vals, err := cmd.Int64Slice()
		if err == nil && len(vals) != len(gs[g].keys) {
			err = fmt.Errorf("obtain each: %d answers for %d keys", len(vals), len(gs[g].keys))
		}
		if err != nil {
			firstErr = coalesce(firstErr, err)
			continue
		}
		for j, v := range vals {
			ok[gs[g].pos[j]] = v == 1
		}
	}
	return ok, firstErr
}

// runGroups runs script count times, call i with the keys and args of
// call(i): one EVALSHA for a single call, else one pipeline.
func (n *node) runGroups(ctx context.Context, script *redis.Script, count int, call func(i int) ([]string, []any)) []*redis.Cmd {
	if count == 1 {
		keys, args := call(0)
		return []*redis.Cmd{script.Run(ctx, n.rdb, keys, args...)}
	}
	return n.runEach(ctx, script, count, call)
}

// releaseSingles releases single-key locks with release_each.lua, one script
// per hash slot group, and reports which it deleted.
func (n *node) releaseSingles(ctx context.Context, keys []string, tokens []string) ([]bool, error) {
	gs := n.groups(keys)
	cmds := n.runGroups(ctx, releaseEachScript, len(gs), func(g int) ([]string, []any) {
		a := make([]any, len(gs[g].pos))
		for j, p := range gs[g].pos {
			a[j] = tokens[p]
		}
		return gs[g].keys, a
	})
	deleted := make([]bool, len(keys))
	var firstErr error
	for g, cmd := range cmds {
		vals, err := cmd.Int64Slice()
		if err != nil {
			firstErr = coalesce(firstErr, err)
			continue
		}
		for j, v := range vals {
			if j < len(gs[g].pos) {
				deleted[gs[g].pos[j]] = v == 1
			}
		}
	}
	return deleted, firstErr
}
