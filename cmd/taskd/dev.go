package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/cmd/taskd/internal/demo"
	"github.com/taskd/taskd/tasks"
)

// devArticlesDefault is how many pending demo articles dev keeps in the pool.
const devArticlesDefault = 10_000

// demoEditor is a demo editor created by this run, with its token.
type demoEditor struct {
	name       string
	categories []string
	token      string
}

// runDev prepares a local playground and serves it.
func runDev(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("dev", "dev [flags]", `
Local playground, run by 'make run': applies the schema, creates demo editors
(printing their tokens, which are shown nowhere else), tops the pool up to
-articles pending demo articles across six newsroom categories, then serves
like 'taskd serve' and prints ready-to-paste curl commands for the API.

Running it again is fine: it creates new editors (names get a random suffix,
because tokens are stored hashed and cannot be shown twice) and only adds the
articles missing to reach -articles.`)
	articles := f.Int("articles", devArticlesDefault, "pending demo articles to have in the pool")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	if *articles < 0 || *articles > 1_000_000 {
		return usagef("dev", "-articles must be 0..1000000, got %d", *articles)
	}
	e, err := a.newEngine(ctx, f, roleDev)
	if err != nil {
		return err
	}
	if err := prepareDev(ctx, a.stdout, e, *articles); err != nil {
		return errors.Join(err, e.Stop(context.Background()))
	}
	<-ctx.Done()
	e.log.Info("shutting down", "cause", context.Cause(ctx))
	return e.Stop(context.Background())
}

// prepareDev applies the schema, creates this run's demo editors and tops the
// pool up, then starts e and prints the guide.
func prepareDev(ctx context.Context, stdout io.Writer, e *running, articles int) error {
	if err := e.Migrate(ctx); err != nil {
		return err
	}
	editors, err := createDemoEditors(ctx, e.Engine)
	if err != nil {
		return err
	}
	added, err := topUpArticles(ctx, e.Engine, articles)
	if err != nil {
		return err
	}
	e.log.InfoContext(ctx, "demo data ready", "editors", len(editors), "articles_added", added)
	if err := e.Start(ctx); err != nil {
		return err
	}
	printDevGuide(stdout, "http://"+reachable(e.Addr()), editors, e.cfg.AdminToken)
	return nil
}

// createDemoEditors creates this run's demo editors.
func createDemoEditors(ctx context.Context, e *taskd.Engine) ([]demoEditor, error) {
	suffix := strings.ToLower(rand.Text()[:4])
	var out []demoEditor
	for _, d := range demo.Editors() {
		token, hash := tasks.NewToken()
		name := d.Name + "-" + suffix
		if _, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: name, Categories: d.Categories, TokenHash: hash}); err != nil {
			return nil, fmt.Errorf("create demo editor %s: %w", name, err)
		}
		out = append(out, demoEditor{name: name, categories: d.Categories, token: token})
	}
	return out, nil
}

// topUpArticles adds demo articles until the demo categories hold want pending
// tasks, and returns how many it added.
func topUpArticles(ctx context.Context, e *taskd.Engine, want int) (int, error) {
	st, err := e.PoolStats(ctx, 0)
	if err != nil {
		return 0, err
	}
	cats := demo.Categories()
	pending := 0
	for _, c := range st.ByCategory {
		if c.Status == tasks.StatusPending && slices.Contains(cats, c.Category) {
			pending += int(c.Count)
		}
	}
	missing := want - pending
	if missing <= 0 {
		return 0, nil
	}
	all := demo.Articles(missing, uint64(time.Now().UnixNano()))
	for start := 0; start < len(all); start += 1000 {
		if _, err := e.InsertTasks(ctx, all[start:min(start+1000, len(all))]); err != nil {
			return start, fmt.Errorf("add demo articles: %w", err)
		}
	}
	return missing, nil
}

// reachable turns a listen address into one to connect to: an unspecified host
// becomes the loopback address.
func reachable(addr string) string {
	for _, unspecified := range []string{"0.0.0.0:", "[::]:", ":"} {
		if strings.HasPrefix(addr, unspecified) {
			return "127.0.0.1:" + strings.TrimPrefix(addr, unspecified)
		}
	}
	return addr
}

// printDevGuide prints the editors and the tour: curl commands to try the API
// with, ready to paste.
func printDevGuide(w io.Writer, base string, editors []demoEditor, adminToken string) {
	fmt.Fprintf(w, "\ntaskd dev is serving on %s (Ctrl-C stops it).\n\nDemo editors (their tokens are shown only here):\n", base)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range editors {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.name, strings.Join(e.categories, ","), e.token)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nThe editor's workspace: open %s/ in a browser and sign in with one of these tokens.\n", base)
	fmt.Fprintf(w, "The ops console: open %s/ops and sign in with the admin token below.\n", base)
	fmt.Fprint(w, "\nA tour of the API (bash; the ID and FENCE lines need jq, or set them by hand):\n\n")
	first := editors[0]
	_ = writeTour(w, tourValues{
		Base:        base,
		EditorToken: first.token, EditorNote: fmt.Sprintf("%s (%s)", first.name, strings.Join(first.categories, ",")),
		AdminToken: adminToken, AdminNote: "admin_token of the configuration",
	})
	fmt.Fprintln(w)
}
