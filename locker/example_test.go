package locker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/locker"
)

// Use the locker on its own: one holder at a time for a key, renewed while
// a long job runs, given back when it is done.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedisAddr})
	defer rdb.Close()
	locks := locker.New(rdb)
	ctx := context.Background()
	key := examplePrefix + "monthly-report"

	lock, err := locks.Obtain(ctx, key, 10*time.Second, nil)
	defer lock.Release(ctx) // safe even when Obtain failed: a nil *Lock is not held
	if errors.Is(err, locker.ErrNotObtained) {
		fmt.Println("another process is writing the report")
		return
	}
	if err != nil {
		log.Fatal(err)
	}

	// Anyone else is refused while the lock is held.
	if _, err := locks.Obtain(ctx, key, 10*time.Second, nil); errors.Is(err, locker.ErrNotObtained) {
		fmt.Println("second holder: not obtained")
	}

	// A long job extends its lease before it runs out, riding out a brief
	// Redis hiccup; a lock that was lost fails at once with ErrNotHeld.
	retry := &locker.Options{RetryStrategy: locker.LinearBackoff(100 * time.Millisecond)}
	if err := lock.Refresh(ctx, 30*time.Second, retry); err != nil {
		log.Fatal(err)
	}
	ttl, err := lock.TTL(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held for about", ttl.Round(10*time.Second))

	// Output:
	// second holder: not obtained
	// held for about 30s
}
