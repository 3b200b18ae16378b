// Package agreement measures how far independent coders agree on the same units:
// Krippendorff's alpha (nominal and interval metric) over reliability data with
// missing values, Fleiss' kappa over a table of counts, and the percent agreement
// and Cohen's kappa of each pair of coders. It is pure computation: no I/O.
//
// Reliability data are units, each holding the values the coders who coded it gave
// (a coder who did not code a unit is missing from it). In taskd a unit is an
// overlap group, a coder an editor and a value the decision (or the named result
// field) of the editor's accepted result.
//
// Undefined values. A coefficient is a ratio of disagreements, which is 0/0 when
// there is nothing to compare (no unit coded twice) or when every pairable value is
// the same (the data show no variation, so chance agreement is total): Krippendorff
// calls alpha undefined then. Such a result has Defined false and Value NaN; callers
// that encode JSON report it as null, beside the percent agreement, which is 1 when
// every value is the same.
package agreement

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Unit is one unit of reliability data: coder id → the value that coder gave.
// Coders who did not code the unit are absent.
type Unit map[int64]string

// Metric is the difference function alpha uses.
type Metric int

const (
	// Nominal values are labels: two values differ (by 1) unless equal.
	Nominal Metric = iota
	// Interval values are numbers: two differ by the square of their distance.
	Interval
)

// String is "nominal" or "interval".
func (m Metric) String() string {
	if m == Interval {
		return "interval"
	}
	return "nominal"
}

// ErrNotNumeric is returned by Krippendorff with the Interval metric when a value does
// not parse as a finite number.
var ErrNotNumeric = errors.New("value is not a number")

// Alpha is Krippendorff's alpha over some reliability data.
type Alpha struct {
	// Value is 1 - Do/De; NaN when not Defined.
	Value float64
	// Defined is false when Pairable is 0 or the pairable values show no
	// variation (De = 0); see the package comment.
	Defined bool
	// Units is how many units were pairable: coded by two coders or more.
	Units int
	// Pairable is how many values those units hold (Krippendorff's n).
	Pairable int
	// Observed and Expected are the disagreements Do and De.
	Observed, Expected float64
}

// Krippendorff computes Krippendorff's alpha of units with metric m, following
// Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011): a
// coincidence matrix of the values of every unit coded at least twice, each
// ordered pair of values in a unit with m_u values weighing 1/(m_u-1). Units coded
// once are not pairable and count for nothing. With Interval, a value that is not
// a finite number returns ErrNotNumeric.
func Krippendorff(units []Unit, m Metric) (Alpha, error) {
	// Values, as indices into vals, and their numbers for Interval.
	index := map[string]int{}
	var nums []float64
	var coded [][]int
	for _, u := range units {
		if len(u) < 2 {
			continue
		}
		vs := make([]int, 0, len(u))
		for _, v := range u {
			i, ok := index[v]
			if !ok {
				i = len(index)
				index[v] = i
				if m == Interval {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
						return Alpha{Value: math.NaN()}, fmt.Errorf("alpha: %q: %w", v, ErrNotNumeric)
					}
					nums = append(nums, f)
				}
			}
			vs = append(vs, i)
		}
		coded = append(coded, vs)
	}
	delta := func(c, k int) float64 {
		if m == Interval {
			d := nums[c] - nums[k]
			return d * d
		}
		if c == k {
			return 0
		}
		return 1
	}
	nv := len(index)
	o := make([]float64, nv*nv) // coincidences o[c*nv+k]
	pairable := 0
	for _, vs := range coded {
		w := 1 / float64(len(vs)-1)
		for i, c := range vs {
			for j, k := range vs {
				if i != j {
					o[c*nv+k] += w
				}
			}
		}
		pairable += len(vs)
	}
	a := Alpha{Value: math.NaN(), Units: len(coded), Pairable: pairable}
	if pairable < 2 {
		return a, nil
	}
	nc := make([]float64, nv)
	for c := 0; c < nv; c++ {
		for k := 0; k < nv; k++ {
			nc[c] += o[c*nv+k]
		}
	}
	n := float64(pairable)
	var do, de float64
	for c := 0; c < nv; c++ {
		for k := 0; k < nv; k++ {
			d := delta(c, k)
			do += o[c*nv+k] * d
			de += nc[c] * nc[k] * d
		}
	}
	a.Observed, a.Expected = do/n, de/(n*(n-1))
	if a.Expected == 0 {
		return a, nil
	}
	a.Value, a.Defined = 1-a.Observed/a.Expected, true
	return a, nil
}

// Kappa is a kappa coefficient: (Po - Pe) / (1 - Pe).
type Kappa struct {
	// Value is the coefficient; NaN when not Defined.
	Value float64
	// Defined is false when there is nothing to compare or Pe = 1 (every
	// rating in one category).
	Defined bool
	// Observed and Expected are the agreements Po and Pe.
	Observed, Expected float64
}

// ErrUnequalRaters is returned by FleissKappa when the subjects were not each
// rated by the same number of raters, two or more.
var ErrUnequalRaters = errors.New("every subject needs the same number of raters, at least 2")

// FleissKappa computes Fleiss' kappa (Fleiss, "Measuring nominal scale
// agreement among many raters", Psychological Bulletin 76(5), 1971) from
// counts[i][j], the number of raters who put subject i in category j. Every
// subject must have the same number of raters, two or more, else it returns
// ErrUnequalRaters. No subject: a Kappa not Defined.
func FleissKappa(counts [][]int) (Kappa, error) {
	k := Kappa{Value: math.NaN()}
	if len(counts) == 0 {
		return k, nil
	}
	raters := 0
	for _, c := range counts[0] {
		raters += c
	}
	if raters < 2 {
		return k, fmt.Errorf("fleiss kappa: %w", ErrUnequalRaters)
	}
	width := 0
	for _, row := range counts {
		width = max(width, len(row))
	}
	totals := make([]float64, width)
	var po float64
	for i, row := range counts {
		sum, sq := 0, 0
		for j, c := range row {
			if c < 0 {
				return k, fmt.Errorf("fleiss kappa: subject %d: negative count", i)
			}
			sum += c
			sq += c * c
			totals[j] += float64(c)
		}
		if sum != raters {
			return k, fmt.Errorf("fleiss kappa: subject %d has %d raters, subject 0 %d: %w", i, sum, raters, ErrUnequalRaters)
		}
		po += float64(sq-raters) / float64(raters*(raters-1))
	}
	all := float64(len(counts) * raters)
	var pe float64
	for _, t := range totals {
		p := t / all
		pe += p * p
	}
	k.Observed, k.Expected = po/float64(len(counts)), pe
	if pe == 1 {
		return k, nil
	}
	k.Value, k.Defined = (k.Observed-pe)/(1-pe), true
	return k, nil
}

// Pair is the agreement of two coders over the units both coded.
type Pair struct {
	// A and B are the coders, A < B.
	A, B int64
	// Units is how many units both coded; Agreed on how many their values
	// were equal.
	Units, Agreed int
	// Percent is Agreed/Units, NaN when Units is 0 (never in Pairs' answer).
	Percent float64
	// Kappa is Cohen's kappa of the two over those units (nominal), with each
	// coder's own distribution of values as chance.
	Kappa Kappa
}

// Pairs returns the agreement of each pair of coders who coded at least one
// unit together, ordered by A then B.
func Pairs(units []Unit) []Pair {
	type key [2]int64
	type tally struct {
		units, agreed int
		a, b          map[string]int // each coder's values over the shared units
	}
	tallies := map[key]*tally{}
	for _, u := range units {
		if len(u) < 2 {
			continue
		}
		coders := make([]int64, 0, len(u))
		for c := range u {
			coders = append(coders, c)
		}
		slices.Sort(coders)
		for i, a := range coders {
			for _, b := range coders[i+1:] {
				t := tallies[key{a, b}]
				if t == nil {
					t = &tally{a: map[string]int{}, b: map[string]int{}}
					tallies[key{a, b}] = t
				}
				t.units++
				if u[a] == u[b] {
					t.agreed++
				}
				t.a[u[a]]++
				t.b[u[b]]++
			}
		}
	}
	out := make([]Pair, 0, len(tallies))
	for k, t := range tallies {
		n := float64(t.units)
		p := Pair{A: k[0], B: k[1], Units: t.units, Agreed: t.agreed, Percent: float64(t.agreed) / n}
		var pe float64
		for v, ca := range t.a {
			pe += float64(ca) / n * float64(t.b[v]) / n
		}
		p.Kappa = Kappa{Value: math.NaN(), Observed: p.Percent, Expected: pe}
		if pe < 1 {
			p.Kappa.Value, p.Kappa.Defined = (p.Percent-pe)/(1-pe), true
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y Pair) int {
		if c := cmp.Compare(x.A, y.A); c != 0 {
			return c
		}
		return cmp.Compare(x.B, y.B)
	})
	return out
}
