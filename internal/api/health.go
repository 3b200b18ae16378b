package api

import (
	"context"
	"net/http"
	"strconv"
)

type healthJSON struct {
	Status string `json:"status"`
}

type readyJSON struct {
	Status string `json:"status"`
	// Checks has a result per readiness check: "ok" or the error.
	Checks map[string]string `json:"checks"`
}

// healthz answers 200 while the process serves.
func (a *api) healthz(w http.ResponseWriter, r *http.Request) error {
	a.writeJSON(w, r, http.StatusOK, healthJSON{Status: "ok"})
	return nil
}

// readyz runs the readiness checks concurrently, each for at most
// CheckTimeout, and answers 200 when all pass, else 503.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) error {
	type result struct {
		name string
		err  error
	}
	ctx, cancel := context.WithTimeout(r.Context(), CheckTimeout)
	defer cancel()
	results := make(chan result, len(a.checks)) // buffered: a late check never blocks
	for _, c := range a.checks {
		go func() { results <- result{c.Name, c.Check(ctx)} }()
	}

	out := readyJSON{Status: "ok", Checks: make(map[string]string, len(a.checks))}
	for _, c := range a.checks {
		out.Checks[c.Name] = "timed out after " + CheckTimeout.String()
	}
collect:
	for range a.checks {
		select {
		case res := <-results:
			out.Checks[res.name] = "ok"
			if res.err != nil {
				out.Checks[res.name] = res.err.Error()
			}
		case <-ctx.Done():
			break collect
		}
	}
	status := http.StatusOK
	for _, v := range out.Checks {
		if v != "ok" {
			out.Status, status = "unavailable", http.StatusServiceUnavailable
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
			break
		}
	}
	a.writeJSON(w, r, status, out)
	return nil
}
