package agreement_test

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/taskd/taskd/internal/agreement"
)

// round3 rounds to the three decimals the sources publish.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// reliability builds units from rows of coders' values, "" for missing, one
// row per coder, coders numbered from 1.
func reliability(rows ...[]string) []agreement.Unit {
	units := make([]agreement.Unit, len(rows[0]))
	for u := range units {
		units[u] = agreement.Unit{}
		for c, row := range rows {
			if row[u] != "" {
				units[u][int64(c+1)] = row[u]
			}
		}
	}
	return units
}

// krippendorff2011 is the reliability data of Krippendorff, "Computing
// Krippendorff's Alpha-Reliability" (2011), section C ("Nominal data, any number
// of observers, missing data"): 4 observers, 12 units, 40 pairable values
// (unit 12 is coded once and is not pairable). The paper gives alpha = 0.743 for
// the nominal metric and 0.849 for the interval metric of the same data.
var krippendorff2011 = reliability(
	[]string{"1", "2", "3", "3", "2", "1", "4", "1", "2", "", "", ""},   // observer A
	[]string{"1", "2", "3", "3", "2", "2", "4", "1", "2", "5", "", "3"}, // observer B
	[]string{"", "3", "3", "3", "2", "3", "4", "2", "2", "5", "1", ""},  // observer C
	[]string{"1", "2", "3", "3", "2", "4", "4", "1", "2", "5", "1", ""}, // observer D
)

func TestAlphaKrippendorff2011(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		metric agreement.Metric
		want   float64
	}{
		{agreement.Nominal, 0.743},
		{agreement.Interval, 0.849},
	} {
		a, err := agreement.Krippendorff(krippendorff2011, c.metric)
		if err != nil {
			t.Fatalf("%s: %v", c.metric, err)
		}
		if !a.Defined || round3(a.Value) != c.want {
			t.Errorf("%s alpha = %v (defined %v), want %v", c.metric, a.Value, a.Defined, c.want)
		}
		if a.Pairable != 40 || a.Units != 11 {
			t.Errorf("%s: %d pairable values in %d units, want 40 in 11", c.metric, a.Pairable, a.Units)
		}
	}
}

// The nominal alpha by the paper's hand computation: n = 40 pairable values,
// the coincidence matrix's marginals n_c = 9, 13, 10, 5, 3 for the values 1..5
// and its diagonal summing to 32, so alpha = 1 - (n-1)(n - Σ o_cc)/(n² - Σ n_c²)
// = 1 - 39·8/(1600 - 384) = 0.7434: Do = 8/40 and De = 1216/1560.
func TestAlphaKrippendorff2011Disagreements(t *testing.T) {
	t.Parallel()
	a, err := agreement.Krippendorff(krippendorff2011, agreement.Nominal)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(a.Observed-8.0/40) > 1e-12 || math.Abs(a.Expected-1216.0/1560) > 1e-12 {
		t.Errorf("Do = %v, De = %v, want 8/40 and 1216/1560", a.Observed, a.Expected)
	}
	if math.Abs(a.Value-(1-a.Observed/a.Expected)) > 1e-12 {
		t.Errorf("alpha %v is not 1 - Do/De = 1 - %v/%v", a.Value, a.Observed, a.Expected)
	}
}

// fleissWorked is the worked example of Fleiss' kappa in the Wikipedia article
// "Fleiss' kappa" (and textbooks following Fleiss, 1971): 10 subjects, 14 raters
// each, 5 categories; P̄ = 0.378, P̄e = 0.213, kappa = 0.210.
var fleissWorked = [][]int{
	{0, 0, 0, 0, 14},
	{0, 2, 6, 4, 2},
	{0, 0, 3, 5, 6},
	{0, 3, 9, 2, 0},
	{2, 2, 8, 1, 1},
	{7, 7, 0, 0, 0},
	{3, 2, 6, 3, 0},
	{2, 5, 3, 2, 2},
	{6, 5, 2, 1, 0},
	{0, 2, 2, 3, 7},
}

func TestFleissKappaWorkedExample(t *testing.T) {
	t.Parallel()
	k, err := agreement.FleissKappa(fleissWorked)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Defined || round3(k.Value) != 0.210 {
		t.Errorf("kappa = %v (defined %v), want 0.210", k.Value, k.Defined)
	}
	if round3(k.Observed) != 0.378 || round3(k.Expected) != 0.213 {
		t.Errorf("P̄ = %v, P̄e = %v, want 0.378 and 0.213", k.Observed, k.Expected)
	}
}

// Over complete data (every subject rated by n raters) Krippendorff's nominal
// alpha is Fleiss' kappa with a small-sample correction of the expected
// disagreement: Do = 1 - P̄ and De = nN/(nN-1) (1 - P̄e). Checked on the worked
// example, where alpha is just above kappa.
func TestFleissKappaAgainstAlpha(t *testing.T) {
	t.Parallel()
	var units []agreement.Unit
	for _, row := range fleissWorked {
		u := agreement.Unit{}
		coder := int64(0)
		for cat, n := range row {
			for range n {
				coder++
				u[coder] = strconv.Itoa(cat)
			}
		}
		units = append(units, u)
	}
	a, err := agreement.Krippendorff(units, agreement.Nominal)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := agreement.FleissKappa(fleissWorked)
	nN := float64(len(fleissWorked) * 14)
	want := 1 - (1-k.Observed)/((nN/(nN-1))*(1-k.Expected))
	if math.Abs(a.Value-want) > 1e-12 || a.Value <= k.Value {
		t.Errorf("alpha = %v, want %v (just above kappa %v)", a.Value, want, k.Value)
	}
}

func TestFleissKappaUnequalRaters(t *testing.T) {
	t.Parallel()
	for _, counts := range [][][]int{{{1, 1}, {2, 1}}, {{1, 0}, {1, 0}}} {
		if _, err := agreement.FleissKappa(counts); !errors.Is(err, agreement.ErrUnequalRaters) {
			t.Errorf("%v: err = %v, want ErrUnequalRaters", counts, err)
		}
	}
	if k, err := agreement.FleissKappa([][]int{{3, 0}, {3, 0}}); err != nil || k.Defined || !math.IsNaN(k.Value) {
		t.Errorf("one category only: %+v, %v, want undefined", k, err)
	}
}

func TestAlphaEdgeCases(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		units    []agreement.Unit
		defined  bool
		value    float64
		pairable int
	}{
		{"no units", nil, false, 0, 0},
		{"one coder", reliability([]string{"a", "b", "c"}), false, 0, 0},
		{"no unit coded twice", reliability([]string{"a", "", "b"}, []string{"", "c", ""}), false, 0, 0},
		{"all agree, one value", reliability([]string{"a", "a"}, []string{"a", "a"}), false, 0, 4},
		{"all agree, values vary", reliability([]string{"a", "b", "c"}, []string{"a", "b", "c"}), true, 1, 6},
		// Two coders who disagree on both units: n = 4, Do = 4/4 = 1, and with
		// n_a = n_b = 2, De = (16 - 8)/(4·3) = 2/3: alpha = 1 - 3/2.
		{"systematic disagreement", reliability([]string{"a", "b"}, []string{"b", "a"}), true, -0.5, 4},
	} {
		a, err := agreement.Krippendorff(c.units, agreement.Nominal)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if a.Defined != c.defined || a.Pairable != c.pairable {
			t.Errorf("%s: defined %v, pairable %d, want %v, %d", c.name, a.Defined, a.Pairable, c.defined, c.pairable)
		}
		if c.defined && math.Abs(a.Value-c.value) > 1e-12 {
			t.Errorf("%s: alpha = %v, want %v", c.name, a.Value, c.value)
		}
		if !c.defined && !math.IsNaN(a.Value) {
			t.Errorf("%s: alpha = %v, want NaN", c.name, a.Value)
		}
	}
}

func TestAlphaIntervalNotNumeric(t *testing.T) {
	t.Parallel()
	_, err := agreement.Krippendorff(reliability([]string{"1", "x"}, []string{"2", "3"}), agreement.Interval)
	if !errors.Is(err, agreement.ErrNotNumeric) {
		t.Errorf("err = %v, want ErrNotNumeric", err)
	}
}

func TestPairs(t *testing.T) {
	t.Parallel()
	// Coders 1 and 2 agree on 3 of 4 units; 3 coded two units, agreeing with 1 on one.
	units := reliability(
		[]string{"yes", "no", "yes", "no"},
		[]string{"yes", "no", "yes", "yes"},
		[]string{"no", "", "yes", ""},
	)
	ps := agreement.Pairs(units)
	if len(ps) != 3 {
		t.Fatalf("pairs = %+v, want 3", ps)
	}
	want := []struct {
		a, b          int64
		units, agreed int
		kappa         float64
	}{
		// 1-2: Po = 3/4; 1 says yes 2/4, 2 says yes 3/4: Pe = 2/4*3/4 + 2/4*1/4 = 1/2.
		{1, 2, 4, 3, 0.5},
		// 1-3 over units 1 and 3: Po = 1/2; Pe = 1/2*1/2*2 = 1/2: kappa 0.
		{1, 3, 2, 1, 0},
		{2, 3, 2, 1, 0},
	}
	for i, w := range want {
		p := ps[i]
		if p.A != w.a || p.B != w.b || p.Units != w.units || p.Agreed != w.agreed {
			t.Errorf("pair %d = %+v, want %d-%d %d/%d", i, p, w.a, w.b, w.agreed, w.units)
		}
		if math.Abs(p.Percent-float64(w.agreed)/float64(w.units)) > 1e-12 {
			t.Errorf("pair %d: percent %v", i, p.Percent)
		}
		if !p.Kappa.Defined || math.Abs(p.Kappa.Value-w.kappa) > 1e-12 {
			t.Errorf("pair %d: kappa %+v, want %v", i, p.Kappa, w.kappa)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	rs := []agreement.Rating{{1, 10, "1"}, {1, 20, "2"}, {2, 10, "3"}, {2, 20, "3"}, {3, 10, "5"}}
	units := agreement.Units(rs)
	if len(units) != 3 || units[0][20] != "2" || len(units[2]) != 1 {
		t.Fatalf("units = %v", units)
	}
	s := agreement.Summarize(units, true)
	if s.Nominal.Units != 2 || s.Nominal.Pairable != 4 || s.Interval == nil || !s.Interval.Defined {
		t.Errorf("summary = %+v, want 2 units, 4 values, interval defined", s)
	}
	// Interval: values 1, 2 and 3, 3; Do = (1 + 1)/4, and with n_1 = n_2 = 1,
	// n_3 = 2, De = 2·(1·1·1 + 1·2·4 + 1·2·1)/(4·3) = 22/12: alpha = 1 - 6/22.
	if s.Interval != nil && math.Abs(s.Interval.Value-(1-6.0/22)) > 1e-12 {
		t.Errorf("interval alpha = %v, want %v", s.Interval.Value, 1-6.0/22)
	}
	if len(s.Pairs) != 1 || s.Pairs[0].Units != 2 || s.Pairs[0].Agreed != 1 {
		t.Errorf("pairs = %+v, want 10-20 agreeing on 1 of 2", s.Pairs)
	}
	units[0][10] = "yes"
	if s := agreement.Summarize(units, true); s.Interval != nil || !s.Nominal.Defined {
		t.Errorf("a label among numbers: %+v, want nominal only", s)
	}
}
