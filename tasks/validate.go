package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of the JSON values the store keeps: task payloads and submitted results.
const (
	// MaxJSONDepth is the deepest nesting of arrays and objects in a payload or a
	// result: {} and [] are one level, {"a":[1]} is two; scalars add none. It is the
	// most MariaDB stores: the json_valid check of its JSON columns refuses 32 levels
	// (MySQL 8 allows 100).
	MaxJSONDepth = 31
	// MaxJSONBytes is the largest payload or result, in bytes. With the escaping the
	// driver adds, one such value stays well inside the server's max_allowed_packet
	// (16 MiB by default on MariaDB, 64 MiB on MySQL 8).
	MaxJSONBytes = 4 << 20
)

// checkText checks a value for a VARCHAR(maxLen) column: valid UTF-8 and 1..maxLen
// characters, which is how the column counts. The error wraps ErrInvalid and names
// field: "category is required" for an empty value, "category must be 1..64
// characters" for a long one.
func checkText(field, s string, maxLen int) error {
	if s == "" {
		return fmt.Errorf("%w: %s is required", ErrInvalid, field)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s must be valid UTF-8", ErrInvalid, field)
	}
	if n := utf8.RuneCountInString(s); n > maxLen {
		return fmt.Errorf("%w: %s must be 1..%d characters", ErrInvalid, field, maxLen)
	}
	return nil
}

// checkJSON checks that data, the value of field, is JSON the database stores as it
// is: at most MaxJSONBytes, one valid JSON value, at most MaxJSONDepth levels of
// arrays and objects, and strings (keys too) of valid UTF-8 that escape no lone
// UTF-16 surrogate such as "\ud800", which MariaDB refuses. The error wraps
// ErrInvalid and names field and the rule, and for a bad string where it is
// ("payload.notes[2] must be valid UTF-8").
func checkJSON(field string, data []byte) error {
	if len(data) > MaxJSONBytes {
		return fmt.Errorf("%w: %s must be at most %d bytes, not %d", ErrInvalid, field, MaxJSONBytes, len(data))
	}
	if !json.Valid(data) {
		return fmt.Errorf("%w: %s must be valid JSON", ErrInvalid, field)
	}
	if f := scanJSON(data, MaxJSONDepth); f != nil {
		return f.err(field)
	}
	return nil
}

// CheckJSONStrings checks every string and key of data, a JSON text, as the store
// checks those of payloads and results: valid UTF-8, and no escaped lone UTF-16
// surrogate ("\ud800"). encoding/json replaces either with U+FFFD when it decodes
// into a Go string, so a caller that decodes JSON from a client runs this on the
// text first to refuse them instead of storing something else. Nesting depth and
// size are not checked.
//
// The error wraps ErrInvalid and names the place of the first bad string as a path
// from the top of data: "[0].title must be valid UTF-8", "a key in result.tags must
// be valid UTF-8". Data that is not valid JSON is for the decoder to refuse:
// CheckJSONStrings returns nil for it.
func CheckJSONStrings(data []byte) error {
	if utf8.Valid(data) && !bytes.Contains(data, []byte(`\u`)) {
		return nil // nothing to find: the usual case, at memory speed
	}
	if !json.Valid(data) {
		return nil
	}
	if f := scanJSON(data, 0); f != nil {
		return f.err("")
	}
	return nil
}

// jsonFault is the first thing scanJSON found that the store cannot keep.
type jsonFault struct {
	path  string // where, as a path from the top: "", ".a", "[2].b", `["a b"]`
	inKey bool   // the fault is in a key of the object at path
	rule  string // the rule broken; unset for the depth limit
	depth int    // the depth limit broken
}

// err describes f in the value named field ("" for a whole JSON text).
func (f *jsonFault) err(field string) error {
	if f.depth > 0 {
		return fmt.Errorf("%w: %s must nest arrays and objects at most %d levels deep", ErrInvalid, orValue(field), f.depth)
	}
	where := orValue(field + f.path)
	if field == "" {
		where = orValue(strings.TrimPrefix(f.path, "."))
	}
	if f.inKey {
		where = "a key in " + where
	}
	return fmt.Errorf("%w: %s %s", ErrInvalid, where, f.rule)
}

func orValue(path string) string {
	if path == "" {
		return "the JSON value"
	}
	return path
}

// jsonFrame is an array or object scanJSON is inside of.
type jsonFrame struct {
	array bool
	index int    // arrays: the element's index
	key   []byte // objects: the member's key as written, without quotes
}

// scanJSON walks data, which must be valid JSON, and returns the first string or key
// that is not valid UTF-8 or escapes a lone surrogate, or the first array or object
// nested deeper than maxDepth (0: no limit); nil when there is none.
func scanJSON(data []byte, maxDepth int) *jsonFault {
	var stack []jsonFrame
	expectKey := false // the next string in the current object is a key
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			if maxDepth > 0 && len(stack) == maxDepth {
				return &jsonFault{depth: maxDepth}
			}
			stack = append(stack, jsonFrame{array: c == '['})
			expectKey = c == '{'
		case '}', ']':
			stack = stack[:len(stack)-1]
			expectKey = false
		case ',':
			top := &stack[len(stack)-1]
			if top.array {
				top.index++
			} else {
				expectKey = true
			}
		case '"':
			end, rule := scanString(data, i+1)
			if rule != "" {
				return &jsonFault{path: jsonPath(stack, expectKey), inKey: expectKey, rule: rule}
			}
			if expectKey {
				stack[len(stack)-1].key = data[i+1 : end]
				expectKey = false
			}
			i = end
		}
	}
	return nil
}

// scanString reads the string that starts at data[i], just after its opening quote,
// and returns the index of its closing quote, and the rule it breaks if any.
func scanString(data []byte, i int) (end int, rule string) {
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i, ""
		case c == '\\':
			if data[i+1] != 'u' {
				i += 2
				continue
			}
			r := hex4(data[i+2 : i+6])
			i += 6
			if !utf16.IsSurrogate(r) {
				continue
			}
			lone := fmt.Sprintf(`must not escape a lone surrogate (\u%04x)`, r)
			if r >= 0xdc00 || i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
				return scanRest(data, i), lone
			}
			if low := hex4(data[i+2 : i+6]); low < 0xdc00 || low > 0xdfff {
				return scanRest(data, i), lone
			}
			i += 6
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return scanRest(data, i), "must be valid UTF-8"
			}
			i += size
		}
	}
	return i, ""
}

// scanRest returns the index of the closing quote of the string data[i] is in.
func scanRest(data []byte, i int) int {
	for i < len(data) && data[i] != '"' {
		if data[i] == '\\' {
			i++
		}
		i++
	}
	return i
}

// hex4 decodes four hex digits, which valid JSON guarantees after \u.
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 16)
	return rune(n)
}

// jsonPath renders the place scanJSON is at: the member or element of each frame
// in stack, the innermost member left out while its key is being read.
func jsonPath(stack []jsonFrame, inKey bool) string {
	var b strings.Builder
	for n, f := range stack {
		if f.array {
			fmt.Fprintf(&b, "[%d]", f.index)
			continue
		}
		if n == len(stack)-1 && inKey {
			break
		}
		if isIdentifier(f.key) {
			b.WriteByte('.')
			b.Write(f.key)
		} else {
			fmt.Fprintf(&b, `["%s"]`, strings.ToValidUTF8(string(f.key), "\uFFFD"))
		}
	}
	return b.String()
}

// isIdentifier reports whether a key can be written as .key in a path.
func isIdentifier(key []byte) bool {
	if len(key) == 0 {
		return false
	}
	for i, c := range key {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
