// Command authload fires wrong bearer tokens at a taskd server for a bounded
// time and reports the answers per second by status, and, given the
// server's MySQL, how many SELECTs the server ran meanwhile (the token
// look-ups, plus its background reads, measured over as long an idle spell
// first).
//
//	go run ./scripts/authload -url http://127.0.0.1:8080 -duration 3s \
//	    -dsn 'taskd:taskd@tcp(127.0.0.1:26306)/taskd'
//
// Every request comes from this host's address, as one attacker's would.
// -distinct sends each token once; otherwise the same few tokens repeat.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the server")
	path := flag.String("path", "/v1/me", "the route to send wrong tokens to")
	duration := flag.Duration("duration", 3*time.Second, "how long to fire, at most 1m")
	workers := flag.Int("c", 32, "concurrent requests")
	distinct := flag.Bool("distinct", true, "a new token for every request")
	dsn := flag.String("dsn", "", "the server's MySQL, to count its SELECTs (optional)")
	flag.Parse()
	if *duration <= 0 || *duration > time.Minute || *workers < 1 || *workers > 1024 {
		fmt.Fprintln(os.Stderr, "authload: -duration must be 0..1m and -c 1..1024")
		os.Exit(2)
	}
	var db *sql.DB
	if *dsn != "" {
		var err error
		if db, err = sql.Open("mysql", *dsn); err != nil {
			fmt.Fprintln(os.Stderr, "authload:", err)
			os.Exit(1)
		}
		defer db.Close()
	}
	idle := selects(db, func() { time.Sleep(*duration) })

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *workers}}
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		seq    atomic.Int64
	)
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var elapsed time.Duration
	busy := selects(db, func() {
		start := time.Now()
		var wg sync.WaitGroup
		for range *workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := map[int]int{}
				for ctx.Err() == nil {
					n := seq.Add(1)
					if !*distinct {
						n %= 8
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *url+*path, nil)
					req.Header.Set("Authorization", "Bearer wrong-token-"+strconv.FormatInt(n, 36))
					res, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							local[0]++
						}
						continue
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					local[res.StatusCode]++
				}
				mu.Lock()
				for k, v := range local {
					counts[k] += v
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed = time.Since(start)
	})
	total := 0
	var codes []int
	for k, v := range counts {
		total += v
		codes = append(codes, k)
	}
	sort.Ints(codes)
	fmt.Printf("%d answers in %.1fs: %.0f/s\n", total, elapsed.Seconds(), float64(total)/elapsed.Seconds())
	for _, k := range codes {
		name := strconv.Itoa(k)
		if k == 0 {
			name = "errors"
		}
		fmt.Printf("  %s: %d\n", name, counts[k])
	}
	if db != nil {
		fmt.Printf("MySQL SELECTs: %d while firing, %d over as long idle before\n", busy, idle)
	}
}

// selects runs fn and returns how many SELECTs the MySQL server ran
// meanwhile (Com_select), or 0 without db.
func selects(db *sql.DB, fn func()) int64 {
	if db == nil {
		fn()
		return 0
	}
	before := comSelect(db)
	fn()
	return comSelect(db) - before
}

func comSelect(db *sql.DB) int64 {
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
		fmt.Fprintln(os.Stderr, "authload: read Com_select:", err)
		os.Exit(1)
	}
	return n
}
