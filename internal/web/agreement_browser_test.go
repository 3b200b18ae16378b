package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// agreementServer starts a server whose category "panel" (overlap 2) has 14
// groups done by pairs of four editors, Ada, Bo, Cy and Dee, with the
// agreement agreementRows shows.
func agreementServer(t *testing.T) *server {
	t.Helper()
	s := startServer(t, liveClaims())
	names := []string{"Ada", "Bo", "Cy", "Dee"}
	tokens := make([]string, len(names))
	for i, n := range names {
		_, tokens[i] = s.editor(n, "panel")
	}
	// Each group of "panel" (overlap 2) taken by one pair, added and done
	// before the next is added: agreed of groups per pair.
	for _, g := range []struct {
		a, b   int
		groups int
		agreed int
	}{
		{0, 1, 4, 4}, // Ada, Bo: 100%
		{0, 2, 3, 2}, // Ada, Cy: 67%
		{0, 3, 2, 0}, // Ada, Dee: 0%
		{1, 2, 2, 1}, // Bo, Cy: 50%
		{1, 3, 3, 1}, // Bo, Dee: 33%
	} {
		for i := range g.groups {
			s.addTask("panel", 1, fmt.Sprintf("%s and %s, %d", names[g.a], names[g.b], i), map[string]any{"text": "x"})
			decisions := []string{"yes", "yes"}
			if i >= g.agreed {
				decisions[1] = "no"
			}
			for j, who := range []int{g.a, g.b} {
				id, fence := claimFor(t, s, tokens[who])
				editorCall(t, s, tokens[who], "POST", fmt.Sprintf("/v1/assignments/%d/submit", id),
					fmt.Sprintf(`{"fence":%d,"result":{},"decision":%q}`, fence, decisions[j]), http.StatusOK, nil)
			}
		}
	}
	return s
}

// agreementRows are the rows of panel's matrix: the name, then a cell per
// editor (share, then "agreed of shared"; "—" the diagonal, "·" no group).
var agreementRows = []string{
	"Ada|—|100%4 of 4|67%2 of 3|0%0 of 2",
	"Bo|100%4 of 4|—|50%1 of 2|33%1 of 3",
	"Cy|67%2 of 3|50%1 of 2|—|·",
	"Dee|0%0 of 2|33%1 of 3|·|—",
}

// agreementRowsJS reads the matrix's rows as agreementRows has them.
const agreementRowsJS = `Array.from(document.querySelectorAll("#ag-matrix tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent).join("|"))`

// TestBrowserOpsAgreement: the console's agreement view shows a category's
// alpha and the matrix of editors' pairwise agreement, by name, each cell its
// share and its count with a colour from red to green, "·" for a pair that
// shares no group; at phone width the matrix scrolls inside its card.
func TestBrowserOpsAgreement(t *testing.T) {
	s := agreementServer(t)

	tb := newTab(t, 1280, 900)
	tb.opsSignIn(s)
	tb.do("open the agreement view", chromedp.Navigate(s.base+"/ops#agreement/panel"))
	tb.waitJS("the matrix", `!document.getElementById("ag-matrix").hidden && document.querySelectorAll("#ag-matrix tbody tr").length === 4`)
	head := eval[string](tb, `Array.from(document.querySelectorAll("#ag-matrix thead th")).map(c => c.textContent).join("|")`)
	if head != "Editor|Ada|Bo|Cy|Dee" {
		t.Errorf("matrix head %q, want the editors by name", head)
	}
	if rows := eval[[]string](tb, agreementRowsJS); fmt.Sprint(rows) != fmt.Sprint(agreementRows) {
		t.Errorf("matrix rows\n%q\nwant\n%q", rows, agreementRows)
	}
	// Red for none, green for all.
	colours := eval[[]string](tb, `[2, 4].map(i => getComputedStyle(document.querySelector("#ag-matrix tbody tr").cells[i]).backgroundColor)`)
	if len(colours) != 2 || colours[0] == colours[1] || colours[0] != "rgb(177, 241, 177)" {
		t.Errorf("cell colours %q, want green for 100%% and another for 0%%", colours)
	}
	kpis := eval[string](tb, `document.getElementById("ag-kpis").textContent`)
	// Alpha's arithmetic is the agreement package's; here only that it is
	// shown, with the counts.
	if want := "groups 14"; !strings.Contains(kpis, want) || !strings.Contains(kpis, "values 28") || !strings.Contains(kpis, "α nominal ") || !strings.Contains(kpis, "compared decision") {
		t.Errorf("kpis %q, want %q, values 28, α nominal and the decision compared", kpis, want)
	}
	tb.screenshot("ops-agreement")

	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.waitJS("laid out at phone width", `window.innerWidth === 390`)
	// The page does not scroll sideways; the matrix's box may.
	if w := eval[float64](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %v px wide at 390", w)
	}
	tb.screenshot("ops-agreement-phone")
	// Names too long for the width: the matrix's box scrolls, the page does not.
	widths := eval[[]float64](tb, `(() => {
		document.querySelectorAll("#ag-matrix th").forEach(th => { th.textContent += " Konstantinopoulou-Smythe"; th.style.whiteSpace = "nowrap"; });
		const box = document.querySelector(".ag-scroll");
		return [document.documentElement.scrollWidth, box.scrollWidth, box.clientWidth];
	})()`)
	if len(widths) != 3 || widths[0] > 390 || widths[1] <= widths[2] {
		t.Errorf("with long names: page %v px wide, matrix box %v px in %v: want the box to scroll, not the page", widths[0], widths[1], widths[2])
	}

	tb.do("a category without groups", chromedp.Navigate(s.base+"/ops#agreement/news"))
	tb.waitJS("the empty note", `!document.getElementById("ag-empty").hidden && document.getElementById("ag-matrix").hidden`)
	if msg := eval[string](tb, `document.getElementById("ag-empty").textContent`); !strings.Contains(msg, "No group of news") {
		t.Errorf("empty note %q", msg)
	}
}

// TestFirefoxOpsAgreement: the agreement matrix in Firefox, at desktop and
// phone width, the page never wider than the screen.
func TestFirefoxOpsAgreement(t *testing.T) {
	s := agreementServer(t)
	for _, c := range []struct {
		name string
		w, h int
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		tb := newFirefox(t, c.w, c.h, 1)
		tb.opsSignIn(s)
		tb.navigate(s.base + "/ops#agreement/panel")
		tb.waitJS("the matrix", `!document.getElementById("ag-matrix").hidden && document.querySelectorAll("#ag-matrix tbody tr").length === 4`)
		if rows := fxEval[[]string](tb, agreementRowsJS); fmt.Sprint(rows) != fmt.Sprint(agreementRows) {
			t.Errorf("%s: matrix rows\n%q\nwant\n%q", c.name, rows, agreementRows)
		}
		if w := fxEval[float64](tb, `document.documentElement.scrollWidth`); w > float64(c.w) {
			t.Errorf("%s: the page is %v px wide at %d", c.name, w, c.w)
		}
		tb.screenshot("firefox-ops-agreement-" + c.name)
	}
}
