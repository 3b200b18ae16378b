// Package demo makes the demo data of `taskd dev`: editors with their beats,
// and newsroom articles with plausible titles and a short body in the payload.
package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/taskd/taskd/tasks"
)

// Editor is a demo editor: a name and the categories it covers.
type Editor struct {
	Name       string
	Categories []string
}

// Editors returns the demo editors.
func Editors() []Editor {
	return []Editor{
		{"alice", []string{"politics", "business"}},
		{"bruno", []string{"sports", "culture"}},
		{"chen", []string{"science", "technology", "business"}},
	}
}

// Categories returns the categories of the demo articles.
func Categories() []string {
	cats := make([]string, 0, len(beats))
	for _, b := range beats {
		cats = append(cats, b.category)
	}
	return cats
}

// Payload is the payload of a demo article.
type Payload struct {
	Author string `json:"author"`
	Text   string `json:"text"`
}

// Articles returns n articles spread evenly over the categories, with
// priorities 0..9 (breaking news high). The same seed gives the same articles.
func Articles(n int, seed uint64) []tasks.NewTask {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]tasks.NewTask, n)
	for i := range out {
		b := beats[i%len(beats)]
		subject := pick(r, b.subjects)
		title := capitalize(fmt.Sprintf(pick(r, b.headlines), subject, pick(r, places)))
		priority := r.IntN(8)
		if r.IntN(20) == 0 {
			title, priority = "Breaking: "+title, 9
		}
		body := make([]string, 3+r.IntN(3))
		order := r.Perm(len(sentences)) // no sentence twice
		for j := range body {
			other := pick(r, b.subjects)
			for other == subject {
				other = pick(r, b.subjects)
			}
			body[j] = capitalize(fmt.Sprintf(sentences[order[j]], subject, pick(r, places), other))
		}
		payload, _ := json.Marshal(Payload{Author: pick(r, authors), Text: strings.Join(body, " ")}) // plain strings always marshal
		out[i] = tasks.NewTask{Category: b.category, Priority: priority, Title: title, Payload: payload}
	}
	return out
}

func pick(r *rand.Rand, xs []string) string { return xs[r.IntN(len(xs))] }

// capitalize upper-cases the first letter of s (all demo text is ASCII).
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// beat is a category's vocabulary. Headlines take a subject and a place.
type beat struct {
	category  string
	subjects  []string
	headlines []string
}

var beats = []beat{
	{"politics", []string{"the city council", "the finance minister", "the opposition leader", "the mayor", "a cross-party committee"},
		[]string{"%s backs new housing plan for %s", "%s faces questions over budget in %s", "Why %s changed course on transit in %s", "%s calls early vote as %s divides"}},
	{"business", []string{"the central bank", "a regional airline", "a local retailer", "the port authority", "a fintech start-up"},
		[]string{"%s reports record quarter despite slowdown in %s", "%s cuts jobs as demand falls in %s", "%s bets on electric fleet for %s", "What %s's merger means for %s"}},
	{"sports", []string{"the home side", "the national team", "a 19-year-old sprinter", "the league leader", "the veteran goalkeeper"},
		[]string{"%s stuns rivals in late comeback in %s", "%s sets course record in %s", "%s is out for the season after injury in %s", "Can %s defend the title in %s?"}},
	{"culture", []string{"the national theatre", "a debut novelist", "the city orchestra", "a street-art collective", "the film festival"},
		[]string{"%s opens season with bold staging in %s", "%s wins prize for work set in %s", "%s returns to %s after ten years", "Inside the studio of %s in %s"}},
	{"science", []string{"marine biologists", "university physicists", "climatologists", "astronomers", "field geologists"},
		[]string{"%s find unexpected species off %s", "%s measure record heat near %s", "%s map ancient river under %s", "How %s track comets from %s"}},
	{"technology", []string{"a chip maker", "the transport agency", "an open-source project", "a robotics firm", "the telecom regulator"},
		[]string{"%s unveils low-power chip designed in %s", "%s rolls out contactless tickets across %s", "%s patches critical flaw exploited in %s", "%s tests delivery robots in %s"}},
}

var places = []string{
	"the old town", "the harbour district", "the northern suburbs", "the river valley", "the capital",
	"the coastal towns", "the university quarter", "the industrial zone", "the mountain villages",
}

var authors = []string{"M. Okafor", "L. Schneider", "R. Tanaka", "S. Haddad", "J. Novak", "A. Ferreira", "P. Lindqvist"}

// sentences take a subject ([1]), a place ([2]) and a second subject ([3]).
var sentences = []string{
	"Officials said %[1]s had been preparing for months, and residents of %[2]s were told to expect changes by spring.",
	"According to people familiar with the matter, %[1]s met twice last week in %[2]s, alongside %[3]s.",
	"Critics argue that %[1]s moved too quickly, while supporters in %[2]s point to early results.",
	"The figures, published on Tuesday, show %[1]s ahead of forecasts in %[2]s for the third month running.",
	"Neither %[1]s nor %[3]s responded to requests for comment before publication.",
	"Local business owners in %[2]s said the decision by %[1]s would affect trading hours.",
	"%[1]s will give more details at a briefing in %[2]s on Friday.",
}
