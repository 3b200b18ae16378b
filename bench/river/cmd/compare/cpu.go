package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100
// on every Linux architecture Go supports).
const clockTicks = 100

// cpuSample is the CPU time (user and system, from /proc) used so far by a
// side's store servers and by this process, which runs one side at a time.
type cpuSample struct {
	store, client time.Duration
	// byServer is store split by the servers' command names (mysqld,
	// redis-server, postgres).
	byServer map[string]time.Duration
	ok       bool
}

// sampleCPU reads the CPU time of pids (the store's server processes, as
// listed now: a PostgreSQL backend that ended since the last sample is
// missed) and of this process. The first pid is the main server: when it
// cannot be read (a server elsewhere) the sample is not ok; the others may
// have ended since they were listed.
func sampleCPU(pids []int) cpuSample {
	s := cpuSample{byServer: make(map[string]time.Duration)}
	for i, pid := range pids {
		t, err := processCPU(pid)
		if err != nil {
			if i == 0 {
				return cpuSample{}
			}
			continue
		}
		s.store += t
		s.byServer[processName(pid)] += t
		s.ok = true
	}
	t, err := processCPU(os.Getpid())
	if err != nil {
		return cpuSample{}
	}
	s.client = t
	return s
}

// perJob sets r's CPU per job from the samples taken at the start and the
// end of its measured span.
func (r *Result) perJob(before, after cpuSample) {
	if !before.ok || !after.ok || r.Jobs <= 0 {
		return
	}
	ms := func(d time.Duration) *float64 {
		v := float64(d) / float64(time.Millisecond) / float64(r.Jobs)
		return &v
	}
	r.StoreCPUMsPerJob = ms(after.store - before.store)
	r.ClientCPUMsPerJob = ms(after.client - before.client)
	if len(after.byServer) > 1 {
		r.StoreCPUMsPerJobByServer = make(map[string]float64, len(after.byServer))
		for name, t := range after.byServer {
			r.StoreCPUMsPerJobByServer[name] = *ms(t - before.byServer[name])
		}
	}
}

// processName returns the command name of process pid ("mysqld",
// "redis-server"), or "pid N" when it cannot be read.
func processName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "pid " + strconv.Itoa(pid)
	}
	return strings.TrimSpace(string(b))
}

// processCPU returns the CPU time (user and system) process pid has used.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is the first, utime the 12th and stime the 13th.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// childrenOf returns pid and its child processes (PostgreSQL's backends and
// background workers of its postmaster).
func childrenOf(pid int) []int {
	out := []int{pid}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// pidFromFile reads a process id from a pid file, 0 when there is none.
func pidFromFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	return pid
}
