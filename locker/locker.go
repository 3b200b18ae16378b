// Package locker implements per-key distributed locks on Redis.
//
// A lock is a key set with SET NX PX to a random token; it is released by a
// Lua compare-and-delete and extended by a Lua compare-and-pexpire, so a
// holder can never release or extend a lock that is no longer its own.
// ObtainMulti holds several keys as one lock, all or none, each operation one
// script over all of them. The same API runs over a single Redis server, a
// Redis Cluster, or several independent Redis masters with the Redlock quorum
// algorithm (NewRedlock).
//
// Batches take many locks in few round trips: ObtainAny takes the first free
// key of several (giving others back first, with Options.ReleaseFirst),
// ObtainEach takes or extends many keys, each under its own token, and
// ReleaseAll gives many locks back; on a Cluster each sends one script per
// hash slot in one pipeline. Client.Lock is a handle on a lock another
// process obtained with a known token, to refresh or release it.
//
// Obtaining returns ErrNotObtained when the lock is held by someone else;
// Refresh, Release and TTL return ErrNotHeld once it is no longer held,
// including on the nil *Lock a failed obtain returns. Retries are opt-in
// (Options.RetryStrategy, default NoRetry), for obtaining and for Refresh.
//
// A lock is a lease: it frees itself when its time to live runs out, and a
// holder that paused past it may not know. Pair it with a fencing check in
// the system of record (taskd fences every write in MySQL); the lock keeps
// competitors apart cheaply, the fence keeps a stale holder from committing.
package locker

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrNotObtained is returned when a lock could not be obtained because
	// another holder has it (or, with Redlock, no key reached a quorum).
	ErrNotObtained = errors.New("locker: not obtained")

	// ErrNotHeld is returned when a lock is no longer held by its token: it
	// expired, was released, or was taken over by another holder.
	ErrNotHeld = errors.New("locker: lock not held")
)

// RedisClient is the part of go-redis the locker uses. *redis.Client and
// *redis.ClusterClient satisfy it, and so does any wrapper around them.
//
// A *redis.ClusterClient (or a wrapper embedding one) is recognised by its
// ForEachMaster method; multi-key scripts are then split by hash slot.
type RedisClient interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Options tune one Obtain, ObtainAny, ObtainMulti or Lock.Refresh call. A nil
// *Options means defaults.
type Options struct {
	// RetryStrategy decides whether and when to try again after a failed
	// attempt: a busy key or a transient Redis error for the obtains, a
	// transient Redis error for Refresh. Default: NoRetry.
	RetryStrategy RetryStrategy

	// Token is the value stored in the lock key. Default: 128 random bits
	// from crypto/rand. A caller-supplied token makes obtaining reentrant: a
	// key that already holds the token counts as obtained and gets the new
	// time to live. Tokens must be unique per holder. Refresh ignores it: a
	// lock is refreshed under its own token.
	Token string

	// ReleaseFirst lists keys that ObtainAny releases, each only if it holds
	// Token, before it tries the candidates: a holder that hands one lock over
	// for the next does both in one round trip (per master, with Redlock).
	// On a Cluster, keys of other hash slots than the candidates' are released
	// in a call of their own. The keys are released whether or not a
	// candidate is obtained. Requires Token; ignored by ObtainMulti.
	ReleaseFirst []string
}

func (o *Options) retryStrategy() RetryStrategy {
	if o == nil || o.RetryStrategy == nil {
		return NoRetry()
	}
	return o.RetryStrategy
}

func (o *Options) token() string {
	if o == nil || o.Token == "" {
		return crand.Text()
	}
	return o.Token
}

const (
	// NodeTimeoutDefault bounds each call to one Redlock master, so that a
	// master that hangs costs little of the lock's validity.
	NodeTimeoutDefault = 50 * time.Millisecond

	// MinTTL is the shortest time to live a lock may have. Shorter leases
	// would be used up by the clock drift allowance alone.
	MinTTL = 10 * time.Millisecond
)

// drift is the allowance for clock drift between this process and Redis,
// subtracted from a lock's validity: 1% of the time to live plus 2ms, as in
// the Redlock algorithm.
func drift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// Client obtains locks. It is safe for concurrent use.
type Client struct {
	nodes       []*node
	quorum      int
	nodeTimeout time.Duration
}

// New returns a Client over a single Redis server or a Redis Cluster.
func New(client RedisClient) *Client {
	return &Client{nodes: []*node{newNode(client)}, quorum: 1}
}

// RedlockOptions configure NewRedlock. A nil *RedlockOptions means defaults.
type RedlockOptions struct {
	// NodeTimeout bounds each call to one master. It is further capped at a
	// third of the lock's time to live. Default: NodeTimeoutDefault.
	NodeTimeout time.Duration
}

// NewRedlock returns a Client that holds each lock on a quorum (N/2+1) of N
// independent Redis masters, following the Redlock algorithm: a lock counts
// only when a quorum granted it within its validity (time to live minus the
// time spent and the clock drift allowance), a failed attempt is undone on
// every master, and retries wait a random delay. Refresh, Release and TTL
// need the quorum too.
//
// Use an odd number of masters, three or more; each may be a single server or
// a Cluster. A master that restarts without persistence must stay out of
// service for one maximum time to live (delayed restart), or it may grant a
// lock that a quorum still holds elsewhere.
func NewRedlock(clients []RedisClient, opt *RedlockOptions) (*Client, error) {
	if len(clients) == 0 {
		return nil, errors.New("locker: redlock needs at least one Redis master")
	}
	c := &Client{quorum: len(clients)/2 + 1, nodeTimeout: NodeTimeoutDefault}
	if opt != nil && opt.NodeTimeout != 0 {
		if opt.NodeTimeout < 0 {
			return nil, fmt.Errorf("locker: redlock node timeout must be positive, got %v", opt.NodeTimeout)
		}
		c.nodeTimeout = opt.NodeTimeout
	}
	for i, rdb := range clients {
		if rdb == nil {
			return nil, fmt.Errorf("locker: redlock master %d is nil", i)
		}
		c.nodes = append(c.nodes, newNode(rdb))
	}
	return c, nil
}

// Obtain tries to obtain the lock key for ttl. It returns ErrNotObtained
// when the key is held by someone else and the retry strategy gives up; when
// ctx ends first, the error joins ErrNotObtained with the context's cause.
// Errors talking to Redis are retried like a busy key when they look
// transient (connection refused, timeouts, LOADING, failover) and returned at
// once otherwise.
//
// On any error the returned *Lock is nil; its methods treat a nil lock as not
// held, so a deferred Release before the error check is safe.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opt *Options) (*Lock, error) {
	return c.ObtainAny(ctx, []string{key}, ttl, opt)
}

// ObtainAny tries keys in order and returns a lock on the first one it can
// obtain. It takes at most two round trips per attempt whatever the number of
// keys (one on a single server), and any extra keys taken along the way (one
// per hash slot on a Cluster, or by a Redlock master outside the quorum) are
// released before it returns. Errors are as for Obtain.
func (c *Client) ObtainAny(ctx context.Context, keys []string, ttl time.Duration, opt *Options) (*Lock, error) {
	if err := validate("obtain", keys, ttl); err != nil {
		return nil, err
	}
	q := &request{keys: keys, ttl: ttl}
	if opt != nil && len(opt.ReleaseFirst) > 0 {
		if opt.Token == "" {
			return nil, errors.New("locker: obtain: ReleaseFirst needs a Token")
		}
		q.release = opt.ReleaseFirst
	}
	return c.obtain(ctx, q, opt)
}

// ObtainMulti obtains all of keys as one lock, or none of them: one script
// per attempt sets every key to the same token only if no key is held by
// another token (keys holding opt.Token count as free, as in Obtain). The
// Lock's Refresh, Release and TTL then act on all keys at once, each in one
// script per Redis. It returns ErrNotObtained when some key is held by someone
// else and the retry strategy gives up; other errors are as for Obtain.
//
// On a Redis Cluster the keys must share a hash slot: give them a common
// hash tag ("{order:42}:payment", "{order:42}:stock"). ObtainMulti checks
// that before it calls Redis and returns an error naming two keys that do not.
// With Redlock a master counts towards the quorum only when it set all keys;
// a failed attempt is undone on every master.
//
// keys must be distinct and non-empty.
func (c *Client) ObtainMulti(ctx context.Context, keys []string, ttl time.Duration, opt *Options) (*Lock, error) {
	if err := validate("obtain multi", keys, ttl); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return nil, fmt.Errorf("locker: obtain multi: key %q appears twice", k)
		}
		seen[k] = true
	}
	if c.cluster() {
		if err := sameSlot(keys); err != nil {
			return nil, err
		}
	}
	return c.obtain(ctx, &request{keys: keys, all: true, ttl: ttl}, opt)
}

// validate checks the arguments every obtain shares.
func validate(op string, keys []string, ttl time.Duration) error {
	if len(keys) == 0 {
		return fmt.Errorf("locker: %s: no keys", op)
	}
	if slices.Contains(keys, "") {
		return fmt.Errorf("locker: %s: empty key", op)
	}
	if ttl < MinTTL {
		return fmt.Errorf("locker: %s: ttl must be at least %v, got %v", op, MinTTL, ttl)
	}
	return nil
}

// sameSlot returns an error naming two of keys that lie in different Redis
// Cluster hash slots, or nil when all share one.
func sameSlot(keys []string) error {
	first := Slot(keys[0])
	for _, k := range keys[1:] {
		if s := Slot(k); s != first {
			return fmt.Errorf("locker: obtain multi: keys %q (hash slot %d) and %q (hash slot %d) are in different "+
				"Redis Cluster hash slots; give every key the same hash tag, as in \"{tag}%s\" and \"{tag}%s\"",
				keys[0], first, k, s, keys[0], k)
		}
	}
	return nil
}

// cluster reports whether any node routes by hash slot.
func (c *Client) cluster() bool {
	return slices.ContainsFunc(c.nodes, func(n *node) bool { return n.cluster })
}

// request is what an obtain asks for: the first free key of keys
// (ObtainAny), or all of them as one lock (ObtainMulti). Its choices are the
// locks it would accept: one per key, or the single lock on all keys.
type request struct {
	keys     []string
	release  []string // keys to release first, if they hold token (ObtainAny)
	all      bool
	token    string
	ttl      time.Duration
	plainSet bool // a single key may be taken with SET NX: no caller token to re-enter
}

// choices returns how many locks q would accept.
func (q *request) choices() int {
	if q.all {
		return 1
	}
	return len(q.keys)
}

// choice returns the keys of choice i.
func (q *request) choice(i int) []string {
	if q.all {
		return q.keys
	}
	return q.keys[i : i+1]
}

// except returns the keys outside choice i.
func (q *request) except(i int) []string {
	if q.all {
		return nil
	}
	return slices.Concat(q.keys[:i], q.keys[i+1:])
}

// op names q in errors.
func (q *request) op() string {
	if q.all {
		return fmt.Sprintf("obtain multi %q", q.keys)
	}
	return fmt.Sprintf("obtain %q", q.keys[0])
}

// obtain runs the attempts of q as opt's retry strategy says.
func (c *Client) obtain(ctx context.Context, q *request, opt *Options) (*Lock, error) {
	q.token = opt.token()
	q.plainSet = opt == nil || opt.Token == ""
	var (
		retry = opt.retryStrategy()
		timer *time.Timer
	)
	for attempt := 1; ; attempt++ {
		lock, err := c.tryObtain(ctx, q)
		if lock != nil {
			return lock, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(ErrNotObtained, context.Cause(ctx))
		}
		if err != nil && !isTransient(err) {
			return nil, fmt.Errorf("locker: %s: %w", q.op(), err)
		}
		backoff := retry.NextBackoff(attempt)
		if backoff <= 0 {
			if err != nil {
				return nil, fmt.Errorf("locker: %s: %w", q.op(), err)
			}
			return nil, ErrNotObtained
		}
		if len(c.nodes) > 1 {
			// Redlock: a random delay, so that clients that split the vote
			// do not split it again.
			backoff = backoff/2 + rand.N(backoff)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < backoff {
			return nil, errors.Join(ErrNotObtained, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = time.NewTimer(backoff)
			defer timer.Stop()
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ErrNotObtained, context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// Lock returns a handle on the lock on key held under token, obtained earlier
// by this or another process (a caller-supplied Options.Token makes that
// possible), so that it can be refreshed, released or inspected. It does no
// I/O; the handle's Validity is 0 until a Refresh succeeds.
func (c *Client) Lock(key, token string) *Lock {
	return c.newLock([]string{key}, token, time.Time{})
}

// ReleaseAll releases many locks, as Release does each, in one round trip
// per node whatever their number (a pipeline), and returns how many it
// released; locks that were not held, and nil locks, are skipped. With
// Redlock a lock counts as released when a quorum of masters deleted it. An
// error means some releases may not have happened; their locks expire with
// their time to live.
func (c *Client) ReleaseAll(ctx context.Context, locks []*Lock) (int, error) {
	held := slices.DeleteFunc(slices.Clone(locks), func(l *Lock) bool { return l == nil })
	if len(held) == 0 {
		return 0, nil
	}
	keys := make([][]string, len(held))
	tokens := make([]string, len(held))
	for i, l := range held {
		keys[i], tokens[i] = l.keys, l.token
	}
	var (
		mu     sync.Mutex
		votes  = make([]int, len(held))
		errs   []error
		closed bool // answers after each returned are dropped
	)
	c.each(ctx, c.nodeTimeout*time.Duration(1+len(held)/1000), func(ctx context.Context, _ int, n *node) (int, error) {
		deleted, err := n.releaseEach(ctx, keys, tokens)
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return 0, err
		}
		for i, d := range deleted {
			if d {
				votes[i]++
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
	released := 0
	for i, v := range votes {
		if v >= c.quorum {
			released++
			held[i].end()
		}
	}
	if len(errs) > 0 {
		return released, fmt.Errorf("locker: release all: %w", errors.Join(errs...))
	}
	return released, nil
}

// tryObtain makes one attempt. It returns a lock, or nil and the error that
// decided the outcome (nil when the keys were simply taken).
func (c *Client) tryObtain(ctx context.Context, q *request) (*Lock, error) {
	start := time.Now()
	until := start.Add(q.ttl - drift(q.ttl))
	if len(c.nodes) == 1 {
		i, err := c.nodes[0].obtain(ctx, q)
		if err != nil || i < 0 {
			return nil, err
		}
		if !time.Now().Before(until) {
			c.undo(ctx, q.choice(i), q.token)
			return nil, nil
		}
		return c.newLock(q.choice(i), q.token, until), nil
	}

	results := c.each(ctx, min(c.nodeTimeout, q.ttl/3), func(ctx context.Context, _ int, n *node) (int, error) {
		return n.obtain(ctx, q)
	})
	votes := make([]int, q.choices())
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
		} else if r.val >= 0 {
			votes[r.val]++
		}
	}
	best := 0
	for i, v := range votes {
		if v > votes[best] {
			best = i
		}
	}
	if votes[best] >= c.quorum && time.Now().Before(until) {
		// Masters outside the quorum may have granted other choices; a
		// master that failed to answer may have granted any.
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		c.each(cctx, c.nodeTimeout, func(ctx context.Context, i int, n *node) (int, error) {
			r := results[i]
			switch {
			case r.err != nil:
				if others := q.except(best); len(others) > 0 {
					return n.release(ctx, others, q.token)
				}
			case r.val >= 0 && r.val != best:
				return n.release(ctx, q.choice(r.val), q.token)
			}
			return 0, nil
		})
		return c.newLock(q.choice(best), q.token, until), nil
	}

	// No quorum: give back everything, everywhere.
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	c.each(cctx, c.nodeTimeout, func(ctx context.Context, i int, n *node) (int, error) {
		switch r := results[i]; {
		case r.err != nil:
			return n.release(ctx, q.keys, q.token)
		case r.val >= 0:
			return n.release(ctx, q.choice(r.val), q.token)
		}
		return 0, nil
	})
	return nil, c.decisive(votes[best], errs)
}

// undo gives back keys after a failed attempt.
func (c *Client) undo(ctx context.Context, keys []string, token string) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	c.each(cctx, c.nodeTimeout, func(ctx context.Context, _ int, n *node) (int, error) {
		return n.release(ctx, keys, token)
	})
}

// decisive returns the node errors joined when they could have changed an
// outcome that got only ok of the quorum, and nil when the outcome stands
// whatever the failed nodes would have said.
func (c *Client) decisive(ok int, errs []error) error {
	if len(errs) == 0 || ok+len(errs) < c.quorum {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// newLock returns a lock on keys, which it copies: the caller's slice may
// change afterwards.
func (c *Client) newLock(keys []string, token string, until time.Time) *Lock {
	return &Lock{client: c, keys: slices.Clone(keys), token: token, until: until}
}

// result is one node's answer in a fan-out.
type result struct {
	val int
	err error
}

// each calls fn for every node and returns their answers in node order. A
// single node is called directly with ctx. Several are called concurrently,
// each bounded by timeout; a node that has not answered by then counts as
// failed with context.DeadlineExceeded even if its client ignores context
// deadlines, and its late answer is dropped.
func (c *Client) each(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, i int, n *node) (int, error)) []result {
	if len(c.nodes) == 1 {
		v, err := fn(ctx, 0, c.nodes[0])
		return []result{{v, err}}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		i int
		result
	}
	answers := make(chan answer, len(c.nodes))
	for i, n := range c.nodes {
		go func() {
			v, err := fn(ctx, i, n)
			answers <- answer{i, result{v, err}}
		}()
	}
	results := make([]result, len(c.nodes))
	pending := len(c.nodes)
	for i := range results {
		results[i] = result{val: -1, err: context.DeadlineExceeded}
	}
	for pending > 0 {
		select {
		case a := <-answers:
			results[a.i] = a.result
			pending--
		case <-ctx.Done():
			return results
		}
	}
	return results
}

// isTransient reports whether err is worth another attempt: the network or
// the server failed, not the request.
func isTransient(err error) bool {
	if errors.Is(err, redis.ErrClosed) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	for _, prefix := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}
