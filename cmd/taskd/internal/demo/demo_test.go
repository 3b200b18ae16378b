package demo

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestArticles(t *testing.T) {
	t.Parallel()
	const n = 600
	got := Articles(n, 1)
	if len(got) != n {
		t.Fatalf("got %d articles, want %d", len(got), n)
	}
	if !reflect.DeepEqual(got, Articles(n, 1)) {
		t.Error("the same seed gave different articles")
	}
	perCat := map[string]int{}
	for _, a := range got {
		perCat[a.Category]++
		if strings.Contains(a.Title, "%!") || a.Title == "" || a.Title[:1] != strings.ToUpper(a.Title[:1]) {
			t.Errorf("bad title %q", a.Title)
		}
		var p Payload
		if err := json.Unmarshal(a.Payload, &p); err != nil || p.Text == "" || p.Author == "" {
			t.Errorf("payload %s: %v", a.Payload, err)
		}
		if strings.Contains(p.Text, "%!") {
			t.Errorf("text with a formatting error: %q", p.Text)
		}
		if a.Priority < 0 || a.Priority > 9 {
			t.Errorf("priority %d", a.Priority)
		}
	}
	for _, c := range Categories() {
		if perCat[c] != n/len(Categories()) {
			t.Errorf("%d articles in %s, want %d", perCat[c], c, n/len(Categories()))
		}
	}
	for _, e := range Editors() {
		for _, c := range e.Categories {
			if !slices.Contains(Categories(), c) {
				t.Errorf("editor %s covers %q, which has no articles", e.Name, c)
			}
		}
	}
}
