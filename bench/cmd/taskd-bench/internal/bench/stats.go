package bench

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sample is one timed call: when it started (since the run began) and how long
// it took.
type sample struct {
	at time.Duration
	d  time.Duration
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted,
// or 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// durations returns the durations of the samples that started in [from, to),
// sorted; to <= 0 means no upper bound.
func durations(ss []sample, from, to time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(ss))
	for _, s := range ss {
		if s.at >= from && (to <= 0 || s.at < to) {
			out = append(out, s.d)
		}
	}
	slices.Sort(out)
	return out
}

// Latency summarizes a set of durations, in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

func summarize(sorted []time.Duration) Latency {
	l := Latency{Count: len(sorted)}
	if len(sorted) == 0 {
		return l
	}
	l.P50Ms = ms(percentile(sorted, 50))
	l.P99Ms = ms(percentile(sorted, 99))
	l.MaxMs = ms(sorted[len(sorted)-1])
	return l
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Ratio compares one number of two results of the same run.
type Ratio struct {
	Name   string  `json:"name"`
	Metric string  `json:"metric"`
	Num    float64 `json:"num"`
	Den    float64 `json:"den"`
	Value  float64 `json:"value"`
	// Target, when not 0, is the value the ratio should reach: at least
	// Target when HigherIsBetter, at most Target otherwise.
	Target         float64 `json:"target,omitempty"`
	HigherIsBetter bool    `json:"higher_is_better"`
	Met            *bool   `json:"met,omitempty"`
}

// newRatio returns the ratio num/den, judged against target when it is not 0.
func newRatio(name, metric string, num, den, target float64, higherIsBetter bool) Ratio {
	r := Ratio{Name: name, Metric: metric, Num: num, Den: den, Target: target, HigherIsBetter: higherIsBetter}
	if den != 0 { // else 0: no ratio (JSON has no infinity)
		r.Value = num / den
	}
	if target != 0 {
		met := r.Value >= target
		if !higherIsBetter {
			met = r.Value <= target
		}
		r.Met = &met
	}
	return r
}

// String renders the ratio as a line of the report, e.g.
// "taskd / seed-naive cycles/s = 3.40x (target >= 3x) MET".
func (r Ratio) String() string {
	s := fmt.Sprintf("%s %s = %.2fx (%.4g / %.4g)", r.Name, r.Metric, r.Value, r.Num, r.Den)
	if r.Met == nil {
		return s
	}
	op := ">="
	if !r.HigherIsBetter {
		op = "<="
	}
	verdict := "NOT MET"
	if *r.Met {
		verdict = "MET"
	}
	return fmt.Sprintf("%s (target %s %gx) %s", s, op, r.Target, verdict)
}

// Memory is a process's resident set, in KiB, from /proc/<pid>/status.
type Memory struct {
	HWMKiB int64 `json:"vm_hwm_kib"` // peak resident set since the process started
	RSSKiB int64 `json:"vm_rss_kib"` // resident set when read
}

// readMemory reads VmHWM and VmRSS of the process pid ("self" for this one).
func readMemory(pid string) (Memory, error) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return Memory{}, fmt.Errorf("read memory of %s: %w", pid, err)
	}
	defer f.Close()
	return parseMemory(f)
}

func parseMemory(f *os.File) (Memory, error) {
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("parse %s: %w", name, err)
		}
		if name == "VmHWM" {
			m.HWMKiB = v
		} else {
			m.RSSKiB = v
		}
	}
	return m, sc.Err()
}
