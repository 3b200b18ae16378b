package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskd/taskd/tasks"
)

// statuses in the order status shows them.
var statusOrder = tasks.Statuses()

// runStatus prints the pool's counts and its live claims.
func runStatus(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("status", "status [flags]", `
Shows the pool: task counts by status and by category, the paused categories,
the live claims (how many, by how many holders, how many expire soon, how many
expired and are not yet back in the pool) and the live claims that expire first,
with their holders. Reads MySQL only, but needs Redis to answer too.`)
	expiring := f.Duration("expiring", tasks.ExpiringWithinDefault, "count claims whose lease passes within this `window` as expiring soon")
	claims := f.Int("claims", 10, "list at most `n` live claims, soonest to expire first (0: none)")
	asJSON := f.Bool("json", false, "print JSON instead of tables")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	if *expiring <= 0 {
		return usagef("status", "-expiring must be positive, got %v", *expiring)
	}
	if *claims < 0 || *claims > tasks.LiveLeasesLimitMax {
		return usagef("status", "-claims must be 0..%d, got %d", tasks.LiveLeasesLimitMax, *claims)
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}
	e, err := a.toolEngine(cfg)
	if err != nil {
		return err
	}
	defer stopTool(e)

	st, err := e.PoolStats(ctx, *expiring)
	if err != nil {
		return err
	}
	var live []tasks.LiveLease
	if *claims > 0 {
		// One page, in id order; the soonest to expire are picked from it.
		if live, err = e.LiveLeases(ctx, tasks.LiveLeasesParams{Limit: tasks.LiveLeasesLimitMax}); err != nil {
			return err
		}
	}
	rep := newStatusReport(st, *expiring, live, *claims)
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.write(a.stdout)
}

// statusReport is what status prints, as text or JSON.
type statusReport struct {
	ByStatus   map[tasks.Status]int64 `json:"by_status"`
	Total      int64                  `json:"total"`
	ByCategory []categoryRow          `json:"by_category"`
	Claims     claimsSummary          `json:"claims"`
	// Soonest are live claims, the soonest to expire first.
	Soonest []claimRow `json:"soonest"`
	// SoonestOf is how many live claims Soonest was picked from.
	SoonestOf int `json:"soonest_of"`
	// Paused lists the paused categories.
	Paused []string `json:"paused"`
}

type categoryRow struct {
	Category string                 `json:"category"`
	ByStatus map[tasks.Status]int64 `json:"by_status"`
	Total    int64                  `json:"total"`
}

type claimsSummary struct {
	Live           int64  `json:"live"`
	Holders        int64  `json:"holders"`
	ExpiringSoon   int64  `json:"expiring_soon"`
	ExpiringWithin string `json:"expiring_within"`
	Expired        int64  `json:"expired"`
}

type claimRow struct {
	TaskID int64  `json:"task_id"`
	Holder string `json:"holder"`
	Fence  int64  `json:"fence"`
	// ExpiresInMS is the time the lease had left, by the database clock.
	ExpiresInMS int64 `json:"expires_in_ms"`
	expiresIn   time.Duration
}

func newStatusReport(st *tasks.PoolStats, window time.Duration, live []tasks.LiveLease, n int) *statusReport {
	rep := &statusReport{
		ByStatus:   st.ByStatus,
		ByCategory: []categoryRow{},
		Claims: claimsSummary{
			Live: st.Live, Holders: st.Holders, ExpiringSoon: st.ExpiringSoon,
			ExpiringWithin: window.String(), Expired: st.Expired,
		},
		Soonest:   []claimRow{},
		SoonestOf: len(live),
		Paused:    st.Paused,
	}
	for _, n := range st.ByStatus {
		rep.Total += n
	}
	for _, c := range st.ByCategory { // ordered by category
		if len(rep.ByCategory) == 0 || rep.ByCategory[len(rep.ByCategory)-1].Category != c.Category {
			rep.ByCategory = append(rep.ByCategory, categoryRow{Category: c.Category, ByStatus: map[tasks.Status]int64{}})
		}
		row := &rep.ByCategory[len(rep.ByCategory)-1]
		row.ByStatus[c.Status] += c.Count
		row.Total += c.Count
	}
	live = slices.Clone(live)
	slices.SortStableFunc(live, func(a, b tasks.LiveLease) int { return cmp.Compare(a.Remaining, b.Remaining) })
	for _, c := range live[:min(n, len(live))] {
		rep.Soonest = append(rep.Soonest, claimRow{
			TaskID: c.ID, Holder: c.Holder, Fence: c.Fence,
			ExpiresInMS: c.Remaining.Milliseconds(), expiresIn: c.Remaining,
		})
	}
	return rep
}

// write prints the report as tables.
func (r *statusReport) write(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "CATEGORY")
	for _, s := range statusOrder {
		fmt.Fprintf(w, "\t%s", s)
	}
	fmt.Fprint(w, "\ttotal\n")
	row := func(name string, counts map[tasks.Status]int64, total int64) {
		fmt.Fprint(w, name)
		for _, s := range statusOrder {
			fmt.Fprintf(w, "\t%d", counts[s])
		}
		fmt.Fprintf(w, "\t%d\n", total)
	}
	for _, c := range r.ByCategory {
		row(c.Category, c.ByStatus, c.Total)
	}
	row("(all)", r.ByStatus, r.Total)
	if len(r.Paused) > 0 {
		fmt.Fprintf(w, "\nPAUSED (nothing handed out)\t%s\n", strings.Join(r.Paused, ", "))
	}

	c := r.Claims
	fmt.Fprint(w, "\nCLAIMS\n")
	fmt.Fprintf(w, "live\t%d\n", c.Live)
	fmt.Fprintf(w, "holders\t%d\n", c.Holders)
	fmt.Fprintf(w, "expiring within %s\t%d\n", c.ExpiringWithin, c.ExpiringSoon)
	fmt.Fprintf(w, "expired, not yet back in the pool\t%d\n", c.Expired)
	if err := w.Flush(); err != nil {
		return err
	}

	if len(r.Soonest) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nLive claims expiring first (%d of %d):\n", len(r.Soonest), r.SoonestOf)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "TASK\tHOLDER\tFENCE\tEXPIRES IN\n")
	for _, s := range r.Soonest {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", s.TaskID, s.Holder, s.Fence, s.expiresIn.Round(100*time.Millisecond))
	}
	return w.Flush()
}
