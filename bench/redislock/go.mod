module github.com/taskd/taskd/bench/redislock

go 1.26.8

require (
	github.com/bsm/redislock v0.9.4
	github.com/redis/go-redis/v9 v9.23.0
	github.com/taskd/taskd v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/taskd/taskd => ../..
