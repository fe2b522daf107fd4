package priority

import (
	"fmt"
	"testing"
)

func TestLocationPrioritizedComparison(t *testing.T) {
	for _, tc := range []struct {
		name       string
		holderKey  string
		candidate  Candidate
		defaultRev string
		want       bool
	}{
		{"default revision steals from non-default", "canary", Candidate{Revision: "stable"}, "stable", true},
		{"default revision steals from remote non-default", "^canary", Candidate{Revision: "stable"}, "stable", true},
		{"remote default revision steals from local non-default", "canary", Candidate{Revision: "stable", Remote: true}, "stable", true},
		{"same revision does not steal", "stable", Candidate{Revision: "stable"}, "stable", false},
		{"non-default never steals from default", "stable", Candidate{Revision: "canary"}, "stable", false},
		{"non-default does not steal from other non-default", "blue", Candidate{Revision: "canary"}, "stable", false},
		{"local steals from remote of same revision", "^canary", Candidate{Revision: "canary"}, "stable", true},
		{"remote never steals from local", "canary", Candidate{Revision: "canary", Remote: true}, "stable", false},
		{"remote does not steal from remote", "^canary", Candidate{Revision: "canary", Remote: true}, "stable", false},
		{"no default known: no revision steal", "canary", Candidate{Revision: "stable"}, "", false},
		{"no default known: local over remote still applies", "^canary", Candidate{Revision: "canary"}, "", true},
		{"empty revision is default", "canary", Candidate{}, "default", true},
		{"empty revision holder key default", "default", Candidate{}, "default", false},
		{"keyless holder loses to the default", "", Candidate{Revision: "stable"}, "stable", true},
		{"keyless holder kept by non-default", "", Candidate{Revision: "canary"}, "stable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LocationPrioritizedComparison(tc.holderKey, tc.candidate, tc.defaultRev); got != tc.want {
				t.Fatalf("LocationPrioritizedComparison(%q, %+v, %q) = %v, want %v", tc.holderKey, tc.candidate, tc.defaultRev, got, tc.want)
			}
		})
	}
}

// TestStealRuleHasNoCycles checks every instance set over revisions x
// locality x default revision: the "may take the lock from" relation must be
// acyclic, or a lock could be stolen back and forth forever.
func TestStealRuleHasNoCycles(t *testing.T) {
	revisions := []string{"default", "stable", "canary", ""}
	var instances []Candidate
	for _, r := range revisions {
		for _, remote := range []bool{false, true} {
			instances = append(instances, Candidate{Revision: r, Remote: remote})
		}
	}
	checked := 0
	for _, def := range append(revisions, "unknown-rev") {
		// edges[i] lists the instances i may steal from.
		edges := make([][]int, len(instances))
		for i, a := range instances {
			for j, b := range instances {
				if LocationPrioritizedComparison(b.Key(), a, def) {
					edges[i] = append(edges[i], j)
				}
			}
		}
		if cycle := findCycle(edges); cycle != nil {
			desc := ""
			for _, i := range cycle {
				desc += fmt.Sprintf(" %q", instances[i].Key())
			}
			t.Fatalf("default %q: steal cycle:%s", def, desc)
		}
		checked++
	}
	if checked != len(revisions)+1 {
		t.Fatalf("checked %d defaults", checked)
	}
}

// findCycle returns the nodes of a cycle in the directed graph, or nil.
func findCycle(edges [][]int) []int {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make([]int, len(edges))
	var stack []int
	var visit func(int) []int
	visit = func(n int) []int {
		state[n] = onStack
		stack = append(stack, n)
		for _, m := range edges[n] {
			switch state[m] {
			case onStack:
				for i, s := range stack {
					if s == m {
						return append([]int(nil), stack[i:]...)
					}
				}
			case unvisited:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for n := range edges {
		if state[n] == unvisited {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

func TestFindCycleDetects(t *testing.T) {
	if findCycle([][]int{{1}, {2}, {0}}) == nil {
		t.Fatal("3-cycle not found")
	}
	if findCycle([][]int{{1}, {2}, {}}) != nil {
		t.Fatal("cycle found in a chain")
	}
	// A rule that lets any two revisions steal from each other must fail.
	bad := func(holder string, c Candidate, _ string) bool { return ParseKey(holder).Revision != c.Revision }
	edges := [][]int{{}, {}}
	cands := []Candidate{{Revision: "a"}, {Revision: "b"}}
	for i, a := range cands {
		for j, b := range cands {
			if bad(b.Key(), a, "") {
				edges[i] = append(edges[i], j)
			}
		}
	}
	if findCycle(edges) == nil {
		t.Fatal("cycle of a symmetric rule not found")
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		c   Candidate
		key string
	}{
		{Candidate{}, "default"},
		{Candidate{Revision: "canary"}, "canary"},
		{Candidate{Revision: "canary", Remote: true}, "^canary"},
		{Candidate{Remote: true}, "^default"},
	} {
		if got := tc.c.Key(); got != tc.key {
			t.Errorf("%+v.Key() = %q, want %q", tc.c, got, tc.key)
		}
	}
	for key, want := range map[string]Candidate{
		"":        {},
		"stable":  {Revision: "stable"},
		"^stable": {Revision: "stable", Remote: true},
		"^":       {Remote: true},
		"^^x":     {Revision: "^x", Remote: true},
	} {
		if got := ParseKey(key); got != want {
			t.Errorf("ParseKey(%q) = %+v, want %+v", key, got, want)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"", "default", "^canary", "^", "^^", "a^b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		c := ParseKey(key)
		if c.Revision != "" && c.Key() != key {
			t.Fatalf("ParseKey(%q).Key() = %q", key, c.Key())
		}
	})
}

// TestCompareAgreesWithStealRule checks, over every pair of keys from a
// small mesh and every default, that the ranking puts first whoever the
// steal rule lets take the lock.
func TestCompareAgreesWithStealRule(t *testing.T) {
	keys := []string{"stable", "^stable", "canary", "^canary", "default", "^default", ""}
	for _, def := range []string{"", "stable", "canary", "default"} {
		for _, hk := range keys {
			if hk == "" {
				continue // a keyless holder (client-go, istiod without a key) is never a ranked candidate
			}
			for _, ck := range keys {
				cand, holder := ParseKey(ck), ParseKey(hk)
				if LocationPrioritizedComparison(hk, cand, def) && Compare(cand, holder, def) >= 0 {
					t.Errorf("default %q: %q may take the lock from %q but does not rank first", def, ck, hk)
				}
			}
		}
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		def  string
		want int
	}{
		{"stable", "canary", "stable", -1},
		{"^stable", "canary", "stable", -1},
		{"canary", "stable", "stable", 1},
		{"stable", "^stable", "", -1},
		{"^stable", "stable", "stable", 1},
		{"canary", "^blue", "stable", -1},
		{"canary", "blue", "stable", 0},
		{"canary", "stable", "", 0},
		{"", "default", "default", 0},
	} {
		if got := Compare(ParseKey(tc.a), ParseKey(tc.b), tc.def); got != tc.want {
			t.Errorf("Compare(%q, %q, default %q) = %d, want %d", tc.a, tc.b, tc.def, got, tc.want)
		}
	}
}
