package locker_test

import (
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
)

// exampleRedisAddr is the Redis server the examples use, from
// TASKD_TEST_REDIS_URL; examplePrefix starts their keys.
var (
	exampleRedisAddr string
	examplePrefix    = "example:" + strings.ToLower(rand.Text()[:10]) + ":"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis()
	flag.Parse()
	url := os.Getenv(testenv.RedisURLVar)
	if url == "" {
		// The tests skip (or fail, under TASKD_TEST_REQUIRE_SERVICES=1) one by
		// one; examples cannot, so they are left out.
		fmt.Printf("examples skipped: set %s to run them\n", testenv.RedisURLVar)
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = flag.Set("test.run", "^Test")
		}
		os.Exit(m.Run())
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", testenv.RedisURLVar, err)
		os.Exit(1)
	}
	exampleRedisAddr = opt.Addr
	os.Exit(m.Run())
}
