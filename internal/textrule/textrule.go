// Package textrule holds the rules of the text taskd keeps and shows to
// people: names, one-line fields (reasons, categories), multi-line notes and
// the words of a workflow (decisions). The API, the import, the config and the
// store all check text here, so that a rule is stated once.
//
// Each check returns nil or an error that says what is wrong and where,
// without the field's name, such as "must not hold U+202E (a bidi control) at
// character 4": the caller names the field and wraps its own sentinel.
package textrule

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// isBidiControl reports whether c is a bidi embedding, override or isolate
// (U+202A..U+202E, U+2066..U+2069): each reorders the text that follows it,
// so that what is shown differs from what is kept.
func isBidiControl(c rune) bool {
	return c >= 0x202a && c <= 0x202e || c >= 0x2066 && c <= 0x2069
}

// isControl reports whether c is a C0 or C1 control character, or DEL.
func isControl(c rune) bool {
	return c < 0x20 || c >= 0x7f && c <= 0x9f
}

// describe names c for an error: "U+2028 (a line separator)".
func describe(c rune) string {
	what := ""
	switch {
	case c == '\n' || c == '\r' || c == 0x85 || c == 0x2028 || c == 0x2029 || c == '\v' || c == '\f':
		what = "a line break"
	case c == '\t':
		what = "a tab"
	case isControl(c):
		what = "a control character"
	case isBidiControl(c):
		what = "a bidi control"
	case unicode.Is(unicode.Cf, c):
		what = "a format character"
	case unicode.IsSpace(c):
		what = "a space other than U+0020"
	default:
		what = "an invisible character"
	}
	return fmt.Sprintf("U+%04X (%s)", c, what)
}

// refuse returns an error naming the first character of s that bad reports,
// and its place (from 1), or nil.
func refuse(s string, bad func(rune) bool) error {
	n := 0
	for _, c := range s {
		n++
		if bad(c) {
			return fmt.Errorf("must not hold %s at character %d", describe(c), n)
		}
	}
	return nil
}

// OneLine checks one line of text, such as a reason: it may not hold a
// control character (C0, line breaks and tabs included, DEL or C1), a line
// or paragraph separator (U+2028, U+2029) or a bidi control (U+202A..U+202E,
// U+2066..U+2069). The error names the first and where it is.
func OneLine(s string) error {
	return refuse(s, func(c rune) bool {
		return isControl(c) || c == 0x2028 || c == 0x2029 || isBidiControl(c)
	})
}

// MultiLine checks text of several lines, such as a reviewer's notes: as
// OneLine, but line breaks (LF, and CR LF) and tabs are allowed.
func MultiLine(s string) error {
	n := 0
	for i, c := range s {
		n++
		ok := c == '\n' || c == '\t' || c == '\r' && strings.HasPrefix(s[i+1:], "\n")
		if !ok && (isControl(c) || isBidiControl(c)) {
			return fmt.Errorf("must not hold %s at character %d", describe(c), n)
		}
	}
	return nil
}

// MaxWordLen is the longest Word, in bytes (and characters).
const MaxWordLen = 32

// Word checks a word of a workflow, such as a decision ("approve",
// "send_back", "yes"): 1..MaxWordLen lowercase ASCII letters, digits, '_' or
// '-', starting with a letter or a digit. Such a word reads the same to
// everyone, and no spreadsheet takes it for a formula.
func Word(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > MaxWordLen {
		return fmt.Errorf("must be at most %d characters", MaxWordLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return fmt.Errorf("must be lowercase letters, digits, '_' or '-', starting with a letter or a digit (%q at character %d)",
				string(utf8RuneAt(s, i)), utf8.RuneCountInString(s[:i])+1)
		}
	}
	return nil
}

// utf8RuneAt is the character that starts at byte i of s.
func utf8RuneAt(s string, i int) rune {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r
}

// nameRefuses reports whether a name may not hold c: anything invisible or
// that changes how the rest is shown. Control characters, line and paragraph
// separators, format characters (Cf: bidi controls, zero-width spaces and
// joiners, the BOM), variation selectors and the other default-ignorable code
// points (the Hangul fillers among them), the blank Braille pattern (U+2800),
// and any space but U+0020.
func nameRefuses(c rune) bool {
	return isControl(c) || unicode.Is(unicode.Cf, c) || unicode.In(c, unicode.Zl, unicode.Zp) ||
		unicode.Is(unicode.Variation_Selector, c) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, c) ||
		c != ' ' && unicode.IsSpace(c) || c == 0x2800 || c == 0xfffd
}

// Name returns the form of a person's name that taskd keeps, its NFC
// normalization, or an error: a name must not be blank, start or end with a
// space, or hold a character that is invisible or changes how the rest is
// shown (see nameRefuses; U+FFFD, the mark of a broken encoding, too). The
// length is for the caller to check, on the result.
func Name(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errors.New("must be valid UTF-8")
	}
	s = norm.NFC.String(s)
	if err := refuse(s, nameRefuses); err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", errors.New("must not be blank")
	}
	if strings.TrimSpace(s) != s {
		return "", errors.New("must not start or end with a space")
	}
	return s, nil
}

// NFC returns s in Unicode's normalization form C, as Name keeps names.
func NFC(s string) string { return norm.NFC.String(s) }

// Skeleton returns the key two names share when they look alike: the
// SHA-256 of name's confusable skeleton (Unicode TR39, section 4), so that
// "rеv" with a Cyrillic е has the skeleton of "rev". Names that differ only
// in letter case have different skeletons (the database compares names
// without case). name is a Name's result.
func Skeleton(name string) [32]byte {
	return sha256.Sum256([]byte(confusables.Skeleton(name)))
}
