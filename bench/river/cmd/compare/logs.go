package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// logCounter is a slog.Handler that counts the warnings and errors a side
// logs and keeps the first one, so that a run's problems show in its
// progress line rather than as a flood of log lines. Each side's client
// logs to one.
type logCounter struct {
	mu    sync.Mutex
	n     int64
	first string
}

func (lc *logCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (lc *logCounter) Handle(_ context.Context, r slog.Record) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.n++
	if lc.n == 1 {
		lc.first = r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" || a.Key == "error" {
				lc.first += fmt.Sprintf(": %v", a.Value)
			}
			return true
		})
	}
	return nil
}

func (lc *logCounter) WithAttrs([]slog.Attr) slog.Handler { return lc }
func (lc *logCounter) WithGroup(string) slog.Handler      { return lc }

// logger returns a logger that counts into lc.
func (lc *logCounter) logger() *slog.Logger { return slog.New(lc) }

// reset starts counting anew.
func (lc *logCounter) reset() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.n, lc.first = 0, ""
}

// Logged returns the count since the last reset and the first record.
func (lc *logCounter) Logged() (int64, string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.n, lc.first
}
