package locker

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed obtain.lua
	obtainLua    string
	obtainScript = redis.NewScript(obtainLua)

	//go:embed obtain_multi.lua
	obtainMultiLua    string
	obtainMultiScript = redis.NewScript(obtainMultiLua)

	//go:embed refresh.lua
	refreshLua    string
	refreshScript = redis.NewScript(refreshLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed pttl.lua
	pttlLua    string
	pttlScript = redis.NewScript(pttlLua)
)

// node is one Redis deployment that answers for a lock on its own: a single
// server, or a Redis Cluster. In Redlock mode a Client has several nodes.
type node struct {
	rdb RedisClient
	// cluster is set when rdb routes commands by hash slot, so that a
	// multi-key script must only name keys of one slot.
	cluster bool
}

// clusterRouter is implemented by *redis.ClusterClient (and by wrappers that
// embed one); a plain *redis.Client and *redis.Ring do not have it.
type clusterRouter interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

func newNode(rdb RedisClient) *node {
	_, cluster := rdb.(clusterRouter)
	return &node{rdb: rdb, cluster: cluster}
}

// group is a run of keys a single script may touch, with their positions in
// the caller's slice.
type group struct {
	keys []string
	pos  []int
}

// groups splits keys into script-sized groups: one group on a single server,
// one per hash slot on a Cluster. Order within a group follows keys.
func (n *node) groups(keys []string) []group {
	if !n.cluster || len(keys) == 1 {
		pos := make([]int, len(keys))
		for i := range pos {
			pos[i] = i
		}
		return []group{{keys: keys, pos: pos}}
	}
	var gs []group
	bySlot := make(map[int]int, len(keys))
	for i, k := range keys {
		s := Slot(k)
		g, ok := bySlot[s]
		if !ok {
			g = len(gs)
			bySlot[s] = g
			gs = append(gs, group{})
		}
		gs[g].keys = append(gs[g].keys, k)
		gs[g].pos = append(gs[g].pos, i)
	}
	return gs
}

// run runs script once per group, with the same args. A single group is one
// EVALSHA (EVAL when the server's script cache was flushed); several groups
// go out in one pipeline, which a Cluster client sends to its masters in
// parallel.
func (n *node) run(ctx context.Context, script *redis.Script, gs []group, args ...any) []*redis.Cmd {
	if len(gs) == 1 {
		return []*redis.Cmd{script.Run(ctx, n.rdb, gs[0].keys, args...)}
	}
	return n.runEach(ctx, script, len(gs), func(i int) ([]string, []any) { return gs[i].keys, args })
}

// runEach runs script count times in one pipeline, call i with the keys and
// args of call(i).
func (n *node) runEach(ctx context.Context, script *redis.Script, count int, call func(i int) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, count)
	n.pipeline(ctx, cmds, func(p redis.Pipeliner, i int) *redis.Cmd {
		keys, args := call(i)
		return script.EvalSha(ctx, p, keys, args...)
	})
	// After SCRIPT FLUSH or a failover, send the source of the scripts
	// that the server no longer knows.
	flushed := false
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmds[i] = nil
			flushed = true
		}
	}
	if flushed {
		n.pipeline(ctx, cmds, func(p redis.Pipeliner, i int) *redis.Cmd {
			keys, args := call(i)
			return script.Eval(ctx, p, keys, args...)
		})
	}
	return cmds
}

// pipeline fills the nil entries of cmds with queue(p, i) in one pipeline.
// If the pipeline fails before a command was queued, that entry gets the
// pipeline's error.
func (n *node) pipeline(ctx context.Context, cmds []*redis.Cmd, queue func(p redis.Pipeliner, i int) *redis.Cmd) {
	todo := make([]int, 0, len(cmds))
	for i, cmd := range cmds {
		if cmd == nil {
			todo = append(todo, i)
		}
	}
	_, err := n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range todo {
			cmds[i] = queue(p, i)
		}
		return nil
	})
	for _, i := range todo {
		if cmds[i] == nil {
			cmds[i] = redis.NewCmd(ctx)
			cmds[i].SetErr(err)
		}
	}
}

// obtain makes one attempt at q on this node and returns the index of the
// choice it took (see request.choice), or -1 when every choice is held by
// others. A single key with plainSet is a bare SET NX PX, cheaper than the
// script but not reentrant.
//
// A request for all keys is one script: the keys share a hash slot (the
// Client checks that on a Cluster). A request for the first free key on a
// Cluster with keys in several slots runs one script per slot, which may each
// take a key; obtain keeps the earliest and releases the rest before it
// returns, so it costs at most two round trips and leaves nothing behind.
func (n *node) obtain(ctx context.Context, q *request) (int, error) {
	if len(q.keys) == 1 && q.plainSet {
		ok, err := n.rdb.SetNX(ctx, q.keys[0], q.token, q.ttl).Result()
		if err != nil || !ok {
			return -1, err
		}
		return 0, nil
	}
	if q.all {
		ok, err := obtainMultiScript.Run(ctx, n.rdb, q.keys, q.token, q.ttl.Milliseconds()).Int()
		if err != nil || ok != 1 {
			return -1, err
		}
		return 0, nil
	}
	gs := n.groups(q.keys)
	var cmds []*redis.Cmd
	switch release := q.release; {
	case len(release) > 0 && len(gs) == 1 && (!n.cluster || sameSlotAs(release, gs[0].keys[0])):
		// One script releases, then obtains: one round trip.
		keys := append(append(make([]string, 0, len(release)+len(q.keys)), release...), q.keys...)
		cmds = []*redis.Cmd{obtainScript.Run(ctx, n.rdb, keys, q.token, q.ttl.Milliseconds(), len(release))}
	case len(release) > 0:
		if _, err := n.release(ctx, release, q.token); err != nil {
			return -1, err
		}
		fallthrough
	default:
		cmds = n.run(ctx, obtainScript, gs, q.token, q.ttl.Milliseconds())
	}

	best, firstErr := -1, error(nil)
	for gi, cmd := range cmds {
		i, err := cmd.Int()
		switch {
		case err != nil:
			firstErr = coalesce(firstErr, err)
		case i > 0 && (best < 0 || gs[gi].pos[i-1] < best):
			best = gs[gi].pos[i-1]
		}
	}
	if len(gs) > 1 {
		// Give back whatever other groups took, and whatever a failed
		// group may have taken before its reply was lost.
		var extra []string
		for gi, cmd := range cmds {
			i, err := cmd.Int()
			switch {
			case err != nil:
				extra = append(extra, gs[gi].keys...)
			case i > 0 && gs[gi].pos[i-1] != best:
				extra = append(extra, gs[gi].keys[i-1])
			}
		}
		if len(extra) > 0 {
			ctx, cancel := cleanupContext(ctx)
			_, _ = n.release(ctx, extra, q.token)
			cancel()
		}
	}
	if best >= 0 {
		return best, nil
	}
	return -1, firstErr
}

// release deletes those of keys that hold token and returns how many it
// deleted.
func (n *node) release(ctx context.Context, keys []string, token string) (int, error) {
	var deleted int
	var firstErr error
	for _, cmd := range n.run(ctx, releaseScript, n.groups(keys), token) {
		d, err := cmd.Int()
		deleted += d
		firstErr = coalesce(firstErr, err)
	}
	return deleted, firstErr
}

// releaseEach releases many locks in one round trip (on a Cluster, one per
// master in parallel): lock i is keys[i] under tokens[i]. Locks of one key
// each go in one script (release_each.lua, per hash slot), others in a
// pipeline of release.lua.
// It reports which locks it deleted whole, every key still holding the token.
func (n *node) releaseEach(ctx context.Context, keys [][]string, tokens []string) ([]bool, error) {
	if single := singleKeys(keys); single != nil {
		return n.releaseSingles(ctx, single, tokens)
	}
	cmds := n.runEach(ctx, releaseScript, len(keys), func(i int) ([]string, []any) {
		return keys[i], []any{tokens[i]}
	})
	deleted := make([]bool, len(keys))
	var firstErr error
	for i, cmd := range cmds {
		d, err := cmd.Int()
		deleted[i] = err == nil && d == len(keys[i])
		firstErr = coalesce(firstErr, err)
	}
	return deleted, firstErr
}

// refresh sets the time to live of every key of a lock if all of them hold
// token, and reports whether it did.
func (n *node) refresh(ctx context.Context, keys []string, token string, ttl time.Duration) (bool, error) {
	v, err := refreshScript.Run(ctx, n.rdb, keys, token, ttl.Milliseconds()).Int()
	return v == 1, err
}

// pttl returns the least remaining time to live of a lock's keys if all of
// them hold token, or -1.
func (n *node) pttl(ctx context.Context, keys []string, token string) (time.Duration, error) {
	ms, err := pttlScript.Run(ctx, n.rdb, keys, token).Int64()
	if err != nil || ms < 0 {
		return -1, err
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// cleanupTimeout bounds the work done to give locks back after the caller's
// context has ended.
const cleanupTimeout = 2 * time.Second

// cleanupContext returns a context for giving locks back: it keeps ctx's
// values but not its cancellation or deadline, since a caller that gave up
// still must not leave locks behind.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

func coalesce(err, next error) error {
	if err != nil {
		return err
	}
	return next
}

// sameSlotAs reports whether every key of keys is in key's hash slot.
func sameSlotAs(keys []string, key string) bool {
	s := Slot(key)
	for _, k := range keys {
		if Slot(k) != s {
			return false
		}
	}
	return true
}

// singleKeys returns the one key of each lock, or nil when some lock has
// several.
func singleKeys(keys [][]string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		if len(k) != 1 {
			return nil
		}
		out[i] = k[0]
	}
	return out
}
