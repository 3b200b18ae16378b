package bench

import (
	"fmt"
	"strings"
)

// CPULine is the MariaDB server's CPU time per cycle (a, b) or per job (f) of
// one compared pair: the median over the runs of each strategy, from the
// mysqld ms/cyc column (the server process's /proc time over the counted
// window, server-wide).
type CPULine struct {
	// Label names the pair, as its target does.
	Label string `json:"label"`
	// Unit is "cycle" or "job".
	Unit string `json:"unit"`
	// Median and Runs hold, per strategy, the median and each run's figure in
	// milliseconds.
	Median map[string]float64   `json:"median_ms"`
	Runs   map[string][]float64 `json:"runs_ms"`
}

// String renders the line, e.g. "MariaDB CPU per cycle, (a) ...: taskd
// 0.61 ms, mysql-skip-locked 0.44 ms (median of 3; per run taskd 0.60 0.61
// 0.63, mysql-skip-locked ...)".
func (c CPULine) String() string {
	var meds, per []string
	n := 0
	for _, s := range []string{StrategyTaskd, StrategySeedNaive, StrategySkipLocked} {
		vs, ok := c.Runs[s]
		if !ok {
			continue
		}
		n = max(n, len(vs))
		meds = append(meds, fmt.Sprintf("%s %.2f ms", s, c.Median[s]))
		runs := make([]string, len(vs))
		for i, v := range vs {
			runs[i] = fmt.Sprintf("%.2f", v)
		}
		per = append(per, s+" "+strings.Join(runs, " "))
	}
	return fmt.Sprintf("MariaDB CPU per %s, %s: %s (median of %d; per run %s)",
		c.Unit, c.Label, strings.Join(meds, ", "), n, strings.Join(per, ", "))
}

// cpuLines summarizes the MariaDB CPU of the compared pairs present in rs,
// those runs where it was measured (a server on this machine, in process).
func cpuLines(rs []Result) []CPULine {
	var out []CPULine
	for _, pt := range pairTargets {
		line := CPULine{Label: pt.label, Unit: "cycle", Median: map[string]float64{}, Runs: map[string][]float64{}}
		if strings.HasPrefix(pt.scenario, "f-") {
			line.Unit = "job"
		}
		for _, r := range rs {
			if r.Scenario == pt.scenario && r.MySQLCPUMsPerCycle != nil {
				line.Runs[r.Strategy] = append(line.Runs[r.Strategy], *r.MySQLCPUMsPerCycle)
			}
		}
		if len(line.Runs) == 0 {
			continue
		}
		for s, vs := range line.Runs {
			line.Median[s] = median(vs)
		}
		out = append(out, line)
	}
	return out
}
