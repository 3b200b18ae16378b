package locker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
)

// eachOf returns requests for keys, key i under token "t<i>" with ttl.
func eachOf(keys []string, ttl time.Duration) []locker.Each {
	each := make([]locker.Each, len(keys))
	for i, k := range keys {
		each[i] = locker.Each{Key: k, Token: fmt.Sprintf("t%d", i), TTL: ttl}
	}
	return each
}

// checkEach runs ObtainEach on lc and checks which requests it obtained, that
// rdb holds exactly those under their tokens, and that ReleaseAll gives them
// back.
func checkEach(t *testing.T, lc *locker.Client, rdb redis.Cmdable, keys []string) {
	t.Helper()
	ctx := context.Background()
	// keys[1] is another holder's; keys[2] already holds its own token
	// (obtained again: reentrant, with the new time to live).
	if err := rdb.Set(ctx, keys[1], "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, keys[2], "t2", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	each := eachOf(keys, time.Minute)
	each[3].TTL = 20 * time.Second // each its own time to live
	start := time.Now()
	locks, err := lc.ObtainEach(ctx, each)
	if err != nil {
		t.Fatalf("obtain each: %v", err)
	}
	for i, l := range locks {
		if (l == nil) != (i == 1) {
			t.Fatalf("lock %d = %v, want all but the other holder's key obtained", i, l)
		}
	}
	got := values(t, rdb, keys)
	for i, v := range got {
		want := each[i].Token
		if i == 1 {
			want = "other"
		}
		if v != want {
			t.Fatalf("key %d holds %q, want %q", i, v, want)
		}
	}
	if ttl := rdb.PTTL(ctx, keys[2]).Val(); !setSince(ttl, time.Minute, start) {
		t.Fatalf("re-entered key's time to live %v, want about a minute", ttl)
	}
	if ttl := rdb.PTTL(ctx, keys[3]).Val(); !setSince(ttl, 20*time.Second, start) {
		t.Fatalf("key 3's time to live %v, want about 20s", ttl)
	}
	n, err := lc.ReleaseAll(ctx, locks)
	if err != nil || n != len(keys)-1 {
		t.Fatalf("release all: %d, %v; want %d", n, err, len(keys)-1)
	}
	got = values(t, rdb, keys)
	for i, v := range got {
		if (i == 1) != (v == "other") || (i != 1 && v != "") {
			t.Fatalf("after release, key %d holds %q", i, v)
		}
	}
}

func TestObtainEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("single server, one round trip", func(t *testing.T) {
		t.Parallel()
		rdb := testenv.Redis(t)
		calls := &counter{}
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
		p := testenv.Prefix(t)
		keys := []string{p + "a", p + "b", p + "c", p + "d", p + "e"}
		// Load the scripts, so that what is counted below is the steady state.
		warm, err := lc.ObtainEach(ctx, eachOf([]string{p + "warm"}, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lc.ReleaseAll(ctx, warm); err != nil {
			t.Fatal(err)
		}
		before := calls.n.Load()
		if _, err := lc.ObtainEach(ctx, eachOf([]string{p + "x", p + "y", p + "z"}, time.Minute)); err != nil {
			t.Fatal(err)
		}
		if n := calls.n.Load() - before; n != 1 {
			t.Fatalf("%d calls to Redis for three locks, want 1", n)
		}
		checkEach(t, lc, rdb, keys)
	})

	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cc := testenv.Cluster(t)
		lc := locker.New(cc)
		p := testenv.Prefix(t)
		// Keys in different hash slots go in one script per slot.
		keys := []string{p + "{a}", p + "{b}", p + "{c}", p + "{d}", p + "{e}"}
		checkEach(t, lc, cc, keys)
	})

	t.Run("redlock", func(t *testing.T) {
		t.Parallel()
		servers, clients, lc := masters(t, 3)
		p := testenv.Prefix(t)
		keys := []string{p + "a", p + "b", p + "c"}
		// b is held by another token on two masters of three: a quorum, so
		// not obtained, and the master that set it gives it back.
		for _, c := range clients[:2] {
			if err := c.Set(ctx, keys[1], "other", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		locks, err := lc.ObtainEach(ctx, eachOf(keys, time.Minute))
		if err != nil {
			t.Fatalf("obtain each: %v", err)
		}
		if locks[0] == nil || locks[1] != nil || locks[2] == nil {
			t.Fatalf("locks %v, want a and c", locks)
		}
		if n := count(holders(t, clients, keys[1]), "t1"); n != 0 {
			t.Fatalf("b left under its would-be token on %d masters", n)
		}
		if n := count(holders(t, clients, keys[0]), "t0"); n != 3 {
			t.Fatalf("a held on %d masters, want 3", n)
		}
		// With one master down the others still make a quorum.
		servers[2].Stop()
		locks, err = lc.ObtainEach(ctx, eachOf([]string{p + "d"}, time.Minute))
		if locks == nil || locks[0] == nil {
			t.Fatalf("with one master of three down: %v, %v; want obtained", locks, err)
		}
	})

	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		lc := locker.New(testenv.Redis(t))
		for _, each := range [][]locker.Each{
			{{Key: "", Token: "t", TTL: time.Minute}},
			{{Key: "k", Token: "", TTL: time.Minute}},
			{{Key: "k", Token: "t", TTL: time.Millisecond}},
			{{Key: "k", Token: "t", TTL: time.Minute}, {Key: "k", Token: "u", TTL: time.Minute}},
		} {
			if _, err := lc.ObtainEach(ctx, each); err == nil {
				t.Errorf("obtain each %+v: no error", each)
			}
		}
	})
}
