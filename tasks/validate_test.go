package tasks

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nested returns a JSON value of depth levels: objects {"k":...} around an array of
// arrays, ending in a scalar, which adds no level.
func nested(depth int) string {
	objects := depth / 2
	arrays := depth - objects
	return strings.Repeat(`{"k":`, objects) + strings.Repeat("[", arrays) + "1" +
		strings.Repeat("]", arrays) + strings.Repeat("}", objects)
}

func TestCheckJSON(t *testing.T) {
	cases := []struct {
		name, data string
		want       string // "" when accepted, else a part of the message
	}{
		{"object", `{"a":[1,"two",{"b":null}],"c":true}`, ""},
		{"scalar", `12.5e3`, ""},
		{"white space around", " \t{}\r\n", ""},
		{"escaped pair", `{"smile":"\ud83d\ude00","max":"\uDBFF\uDFFF"}`, ""},
		{"escaped backslash before u", `{"a":"\\ud800"}`, ""},
		{"escapes of every kind", `{"a":"\"\\\/\b\f\n\r\t\u0000\u00e9"}`, ""},
		{"raw 4-byte UTF-8", `{"a":"` + "\U0010FFFF\U0001F600" + `"}`, ""},
		{"depth 31", nested(MaxJSONDepth), ""},
		{"depth 31 of empty arrays", strings.Repeat("[", 31) + strings.Repeat("]", 31), ""},
		{"wide but shallow", "[" + strings.Repeat("[],", 1000) + "[]]", ""},
		{"an empty object in an array", `[{},"ok"]`, ""},

		{"empty", ``, "result must be valid JSON"},
		{"not JSON", `{"a":}`, "result must be valid JSON"},
		{"two values", `{} {}`, "result must be valid JSON"},
		{"depth 32", nested(MaxJSONDepth + 1), "result must nest arrays and objects at most 31 levels deep"},
		{"depth 33", nested(MaxJSONDepth + 2), "at most 31 levels"},
		{"depth 32 of empty arrays", strings.Repeat("[", 32) + strings.Repeat("]", 32), "at most 31 levels"},
		{"invalid UTF-8", "{\"a\":\"x\xffy\"}", "result.a must be valid UTF-8"},
		{"invalid UTF-8 in an array", "{\"a\":[1,{\"b\":[\"ok\",\"\xc3\"]}]}", "result.a[1].b[1] must be valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"ok\":1,\"\xff\":2}", "a key in result must be valid UTF-8"},
		{"invalid UTF-8 in a nested key", "{\"a b\":{\"\xff\":2}}", `a key in result["a b"] must be valid UTF-8`},
		{"encoded surrogate", "[\"\xed\xa0\x80\"]", "result[0] must be valid UTF-8"},
		{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", "result must be valid UTF-8"},
		{"overlong encoding", "\"\xc0\xaf\"", "must be valid UTF-8"},
		{"lone high surrogate", `{"a":"\ud800"}`, `result.a must not escape a lone surrogate (\ud800)`},
		{"lone low surrogate", `{"a":"x\uDC00"}`, `lone surrogate (\udc00)`},
		{"high then letter", `{"a":"\ud800\u0041"}`, `lone surrogate (\ud800)`},
		{"high then high", `{"a":"\ud800\ud800"}`, `lone surrogate (\ud800)`},
		{"low then low", `{"a":"\udc00\udc00 and more"}`, `lone surrogate (\udc00)`},
		{"low then high", `{"a":"\udc00\ud800"}`, `lone surrogate (\udc00)`},
		{"high then escaped backslash", `{"a":"\ud800\\u0041"}`, `lone surrogate (\ud800)`},
		{"high at the end", `["\ud83d"]`, `result[0] must not escape a lone surrogate`},
		{"lone surrogate in a key", `{"\udfff":1}`, `a key in result must not escape a lone surrogate`},
		{"too big", `"` + strings.Repeat("x", MaxJSONBytes) + `"`, fmt.Sprintf("result must be at most %d bytes", MaxJSONBytes)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkJSON("result", []byte(c.data))
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestCheckJSONStrings(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{"clean", `[{"category":"news","title":"x"}]`, ""},
		{"escapes only", `{"reason":"caf\u00e9 \ud83d\ude00"}`, ""},
		{"deep is fine here", nested(100), ""},
		{"not JSON is the decoder's", "{\"a\":\"\xff\"", ""},
		{"title", "[{\"category\":\"news\"},{\"category\":\"news\",\"title\":\"\xff\"}]", "[1].title must be valid UTF-8"},
		{"reason", "{\"fence\":1,\"reason\":\"\xe2\x82\"}", "invalid input: reason must be valid UTF-8"},
		{"result", `{"fence":1,"result":{"notes":["\udc00"]}}`, `result.notes[0] must not escape a lone surrogate (\udc00)`},
		{"key at the top", "{\"\xff\":1}", "a key in the JSON value must be valid UTF-8"},
		{"string at the top", "\"\xff\"", "the JSON value must be valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckJSONStrings([]byte(c.data))
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want ErrInvalid saying %q", err, c.want)
			}
		})
	}
}

func TestCheckText(t *testing.T) {
	for _, c := range []struct {
		s    string
		want string
	}{
		{"a", ""},
		{strings.Repeat("é", 4), ""},
		{strings.Repeat("😀", 4), ""}, // characters, not bytes
		{"", "title is required"},
		{"abcde", "title must be 1..4 characters"},
		{"a\xff", "title must be valid UTF-8"},
		{"\xed\xa0\x80", "title must be valid UTF-8"},
	} {
		err := checkText("title", c.s, 4)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("checkText(%q) = %v", c.s, err)
		case c.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("checkText(%q) = %v, want ErrInvalid saying %q", c.s, err, c.want)
		}
	}
}
