package agreement

// Rating is one coder's value for one unit.
type Rating struct {
	Unit, Coder int64
	Value       string
}

// Units gathers ratings into units, in the order each unit first appears. A
// coder rating one unit twice keeps the last value.
func Units(rs []Rating) []Unit {
	at := map[int64]int{}
	var units []Unit
	for _, r := range rs {
		i, ok := at[r.Unit]
		if !ok {
			i = len(units)
			at[r.Unit] = i
			units = append(units, Unit{})
		}
		units[i][r.Coder] = r.Value
	}
	return units
}

// Summary is what agreement reports over some reliability data.
type Summary struct {
	// Nominal is alpha with the nominal metric.
	Nominal Alpha
	// Interval is alpha with the interval metric when asked for and every
	// value is a number; nil otherwise.
	Interval *Alpha
	// Pairs is the agreement of each pair of coders (see Pairs).
	Pairs []Pair
}

// Summarize computes alpha (nominal, and interval when interval is true and
// every value is a number) and the pairs of units.
func Summarize(units []Unit, interval bool) Summary {
	s := Summary{Pairs: Pairs(units)}
	s.Nominal, _ = Krippendorff(units, Nominal) // Nominal takes any value
	if interval {
		if a, err := Krippendorff(units, Interval); err == nil {
			s.Interval = &a
		}
	}
	return s
}
