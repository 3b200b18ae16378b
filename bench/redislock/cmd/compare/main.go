// Command compare runs taskd's locker and github.com/bsm/redislock side by
// side on the same Redis: Obtain+Release pairs on distinct keys, one
// goroutine at a time and with 50 goroutines. Within each round the two
// lockers take turns in short slices, alternating which goes first, so that
// changes in the machine's load fall on both alike. It prints pairs/s and the
// ratio taskd/bsm per mode (overall, and its lowest and highest round), and
// writes them as JSON with -json.
//
//	cd bench/redislock && go run ./cmd/compare [-rounds 3] [-duration 2s] [-slice 250ms] [-json FILE]
//
// The Redis is -redis, by default $TASKD_TEST_REDIS_URL (scripts/services.sh
// env prints it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/taskd/taskd/bench/redislock"
)

// Stats are one locker's results in one mode.
type Stats struct {
	Pairs       int64     `json:"pairs"`
	Seconds     float64   `json:"seconds"`
	PairsPerSec float64   `json:"pairs_per_sec"`
	Rounds      []float64 `json:"rounds_pairs_per_sec"`
}

func (s *Stats) add(pairs int64, elapsed time.Duration) {
	s.Pairs += pairs
	s.Seconds += elapsed.Seconds()
	s.PairsPerSec = float64(s.Pairs) / s.Seconds
	s.Rounds = append(s.Rounds, float64(pairs)/elapsed.Seconds())
}

// Mode is one concurrency level.
type Mode struct {
	Name       string `json:"name"`
	Goroutines int    `json:"goroutines"`
	Taskd      Stats  `json:"taskd"`
	BSM        Stats  `json:"bsm"`
	// Ratio is taskd's pairs/s over bsm's, all rounds together.
	Ratio float64 `json:"ratio_taskd_bsm"`
	// RoundRatios are the same ratio round by round, to show the spread.
	RoundRatios []float64 `json:"round_ratios"`
}

// Report is what -json writes.
type Report struct {
	Time          time.Time `json:"time"`
	GoVersion     string    `json:"go_version"`
	GOMAXPROCS    int       `json:"gomaxprocs"`
	Rounds        int       `json:"rounds"`
	RoundDuration string    `json:"round_duration"`
	Slice         string    `json:"slice"`
	TTL           string    `json:"ttl"`
	PoolSize      int       `json:"pool_size"`
	Modes         []Mode    `json:"modes"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		url        = flag.String("redis", os.Getenv("TASKD_TEST_REDIS_URL"), "Redis URL (default $TASKD_TEST_REDIS_URL)")
		rounds     = flag.Int("rounds", 3, "rounds per mode; each runs both lockers")
		duration   = flag.Duration("duration", 2*time.Second, "time each locker runs per round, in slices")
		slice      = flag.Duration("slice", 250*time.Millisecond, "the lockers take turns this often within a round")
		warmup     = flag.Duration("warmup", 300*time.Millisecond, "unmeasured run of each locker before each mode")
		goroutines = flag.Int("goroutines", 50, "goroutines of the parallel mode")
		jsonPath   = flag.String("json", "", "also write the results as JSON to this file")
	)
	flag.Parse()
	if *url == "" {
		return fmt.Errorf("no Redis: set TASKD_TEST_REDIS_URL (eval \"$(scripts/services.sh env)\") or pass -redis")
	}
	if *rounds < 1 || *duration <= 0 || *slice <= 0 || *goroutines < 1 {
		return fmt.Errorf("-rounds, -duration, -slice and -goroutines must be positive")
	}

	// One client per locker, with the same options, so that neither shares
	// the other's pool. subjects[0] is taskd, subjects[1] bsm.
	var subjects []redislock.Subject
	for _, name := range []string{"taskd", "bsm"} {
		rdb, err := redislock.NewRedis(*url)
		if err != nil {
			return err
		}
		defer rdb.Close()
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			return fmt.Errorf("redis %s: %w", rdb.Options().Addr, err)
		}
		for _, s := range redislock.Subjects(rdb) {
			if s.Name == name {
				subjects = append(subjects, s)
			}
		}
	}

	report := Report{
		Time:          time.Now().UTC(),
		GoVersion:     runtime.Version(),
		GOMAXPROCS:    runtime.GOMAXPROCS(0),
		Rounds:        *rounds,
		RoundDuration: duration.String(),
		Slice:         slice.String(),
		TTL:           redislock.TTL.String(),
		PoolSize:      redislock.PoolSizeDefault,
	}
	ctx := context.Background()
	for _, m := range []Mode{{Name: "serial", Goroutines: 1}, {Name: fmt.Sprintf("parallel%d", *goroutines), Goroutines: *goroutines}} {
		for _, s := range subjects {
			load := redislock.Load{Goroutines: m.Goroutines, Duration: *warmup}
			if _, _, err := redislock.Run(ctx, s.Pair, redislock.Prefix(s.Name+":warmup"), load); err != nil {
				return err
			}
		}
		for range *rounds {
			var round [2]struct {
				pairs   int64
				elapsed time.Duration
			}
			// Each locker runs for duration in slices, taking turns, and
			// every other turn the other one goes first (ABBA...).
			for k := range max(int(*duration / *slice), 1) {
				for j := range subjects {
					if k%2 == 1 {
						j = len(subjects) - 1 - j
					}
					s := subjects[j]
					load := redislock.Load{Goroutines: m.Goroutines, Duration: min(*slice, *duration)}
					pairs, elapsed, err := redislock.Run(ctx, s.Pair, redislock.Prefix(s.Name+":"+m.Name), load)
					if err != nil {
						return err
					}
					round[j].pairs += pairs
					round[j].elapsed += elapsed
				}
			}
			m.Taskd.add(round[0].pairs, round[0].elapsed)
			m.BSM.add(round[1].pairs, round[1].elapsed)
			m.RoundRatios = append(m.RoundRatios, m.Taskd.Rounds[len(m.Taskd.Rounds)-1]/m.BSM.Rounds[len(m.BSM.Rounds)-1])
		}
		m.Ratio = m.Taskd.PairsPerSec / m.BSM.PairsPerSec
		report.Modes = append(report.Modes, m)
	}

	printTable(os.Stdout, &report)
	if *jsonPath != "" {
		return writeJSON(*jsonPath, &report)
	}
	return nil
}

func printTable(w io.Writer, r *Report) {
	fmt.Fprintf(w, "Obtain+Release pairs/s, %d rounds x %s per locker, %s, GOMAXPROCS=%d\n",
		r.Rounds, r.RoundDuration, r.GoVersion, r.GOMAXPROCS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tgoroutines\ttaskd pairs/s\tbsm pairs/s\ttaskd/bsm\tper round\t")
	for _, m := range r.Modes {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.2f\t%.2f..%.2f\t\n", m.Name, m.Goroutines,
			m.Taskd.PairsPerSec, m.BSM.PairsPerSec, m.Ratio, slices.Min(m.RoundRatios), slices.Max(m.RoundRatios))
	}
	_ = tw.Flush()
}

func writeJSON(path string, r *Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
