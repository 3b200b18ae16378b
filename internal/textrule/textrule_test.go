package textrule

import (
	"strings"
	"testing"
)

func TestOneLine(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "fine", "naïve – café ✓", "שלום עולם", "میخواهم", "a\u200cb"} {
		if err := OneLine(ok); err != nil {
			t.Errorf("OneLine(%q) = %v, want nil", ok, err)
		}
	}
	for s, want := range map[string]string{
		"a\nb":       "U+000A (a line break) at character 2",
		"a\tb":       "U+0009 (a tab) at character 2",
		"\x00":       "U+0000 (a control character) at character 1",
		"ab\x1b[31m": "U+001B (a control character) at character 3",
		"a\x7f":      "U+007F",
		"a\u0085":    "U+0085 (a line break)",
		"one\u2028":  "U+2028 (a line break) at character 4",
		"one\u2029":  "U+2029 (a line break)",
		"x\u202ey":   "U+202E (a bidi control) at character 2",
		"x\u202ay":   "U+202A (a bidi control)",
		"x\u2066y":   "U+2066 (a bidi control)",
		"x\u2069y":   "U+2069 (a bidi control)",
		"é\u202dabc": "U+202D (a bidi control) at character 2",
	} {
		if err := OneLine(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OneLine(%q) = %v, want an error saying %q", s, err, want)
		}
	}
}

func TestMultiLine(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "fix\nthe lede", "a\tb", "windows\r\nlines", "naïve"} {
		if err := MultiLine(ok); err != nil {
			t.Errorf("MultiLine(%q) = %v, want nil", ok, err)
		}
	}
	for s, want := range map[string]string{
		"bell\a":     "U+0007 (a control character) at character 5",
		"nul\x00":    "U+0000",
		"esc\x1b[2J": "U+001B",
		"cr\ronly":   "U+000D (a line break) at character 3",
		"x\u202e":    "U+202E (a bidi control)",
		"x\u2067":    "U+2067 (a bidi control)",
		"c1\u009b":   "U+009B (a control character)",
	} {
		if err := MultiLine(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("MultiLine(%q) = %v, want an error saying %q", s, err, want)
		}
	}
}

func TestWord(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"approve", "send_back", "yes", "5", "re-check", strings.Repeat("a", MaxWordLen)} {
		if err := Word(ok); err != nil {
			t.Errorf("Word(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "=1+1", "-1", "_x", "Approve", "send back", "é", "a\x00", "@sum", "+x",
		strings.Repeat("a", MaxWordLen+1)} {
		if err := Word(bad); err == nil {
			t.Errorf("Word(%q) = nil, want an error", bad)
		}
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	// NFC: "e" and a combining acute accent are kept as "é".
	if got, err := Name("Rene\u0301"); err != nil || got != "René" {
		t.Errorf("Name(decomposed) = %q, %v; want %q", got, err, "René")
	}
	for _, ok := range []string{"rev", "Rita M.", "Ђорђе", "李小龙", "O'Neil"} {
		if got, err := Name(ok); err != nil || got != ok {
			t.Errorf("Name(%q) = %q, %v", ok, got, err)
		}
	}
	for s, want := range map[string]string{
		"a\x00b":      "U+0000",
		"\x1b[31mred": "U+001B",
		"two\nlines":  "U+000A (a line break)",
		"tab\tbed":    "U+0009",
		"   ":         "blank",
		"\u3000":      "U+3000 (a space other than U+0020)",
		" rev":        "start or end with a space",
		"rev ":        "start or end with a space",
		"rev\u202e":   "U+202E (a bidi control)",
		"r\u200bev":   "U+200B (a format character)",
		"r\u200dev":   "U+200D (a format character)",
		"rev\ufe0f":   "U+FE0F",
		"a\u00a0b":    "U+00A0 (a space other than U+0020)",
		"x\u2028":     "U+2028 (a line break)",
		"\ufeffrev":   "U+FEFF (a format character)",
		"\xff":        "valid UTF-8",
		"r\ufffd":     "U+FFFD",
		"\u3164":      "U+3164 (an invisible character)",
		"a\u2800":     "U+2800 (an invisible character)",
		"re\u034fv":   "U+034F (an invisible character)",
	} {
		if got, err := Name(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Name(%q) = %q, %v; want an error saying %q", s, got, err, want)
		}
	}
}

func TestSkeleton(t *testing.T) {
	t.Parallel()
	same := [][2]string{
		{"rev", "r\u0435v"},            // Cyrillic е
		{"paypal", "p\u0430yp\u0430l"}, // Cyrillic а
		{"Ivan", "lvan"},               // capital I, small L
		{"rn", "m"},
		{"René", "Rene\u0301"}, // once normalized, the same name
	}
	for _, p := range same {
		a, _ := Name(p[0])
		b, _ := Name(p[1])
		if Skeleton(a) != Skeleton(b) {
			t.Errorf("Skeleton(%q) != Skeleton(%q), want equal", p[0], p[1])
		}
	}
	for _, p := range [][2]string{{"rev", "ref"}, {"rev", "Rev"}, {"ann", "anna"}} {
		if Skeleton(p[0]) == Skeleton(p[1]) {
			t.Errorf("Skeleton(%q) == Skeleton(%q), want different", p[0], p[1])
		}
	}
}
