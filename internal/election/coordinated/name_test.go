package coordinated

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestCandidateName(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		lease, identity string
		wantPrefix      string
	}{
		{"istio-leader", "istiod-7f9c-abcde", "istio-leader-istiod-7f9c-abcde-"},
		{"istio-leader", "Pod_Name.1", "istio-leader-pod-name.1-"},
		{"istio-leader", "host_a1b2", "istio-leader-host-a1b2-"},
		{"lease", "", "lease--"},
		{"", "", ""},
		{"", "-.-", ""},
		{"a", ".x.", "a--x--"},
		{"lease", long, "lease-xxx"},
		{long, "id", "xxx"},
		{"UPPER", "ünïcode", "upper-"},
	} {
		got := CandidateName(tc.lease, tc.identity)
		if msgs := validation.IsDNS1123Subdomain(got); len(msgs) > 0 {
			t.Errorf("CandidateName(%q, %q) = %q, invalid: %v", tc.lease, tc.identity, got, msgs)
		}
		if !strings.HasPrefix(got, tc.wantPrefix) {
			t.Errorf("CandidateName(%q, %q) = %q, want prefix %q", tc.lease, tc.identity, got, tc.wantPrefix)
		}
		if again := CandidateName(tc.lease, tc.identity); again != got {
			t.Errorf("CandidateName(%q, %q) not stable: %q then %q", tc.lease, tc.identity, got, again)
		}
	}
}

func TestCandidateNameUnique(t *testing.T) {
	pairs := [][2]string{
		{"a-b", "c"}, {"a", "b-c"}, // the same joined text
		{"lease", "Host"}, {"lease", "host"}, // the same after lower-casing
		{"lease", "a_b"}, {"lease", "a-b"}, {"lease", "a.b"}, {"lease", "a/b"},
		{"l", strings.Repeat("y", 300)}, {"l", strings.Repeat("y", 301)}, // the same after shortening
		{"", ""}, {"", "-"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		n := CandidateName(p[0], p[1])
		if prev, dup := seen[n]; dup {
			t.Errorf("CandidateName%v = CandidateName%v = %q", p, prev, n)
		}
		seen[n] = p
	}
	if len(seen) != len(pairs) {
		t.Fatalf("%d names for %d pairs", len(seen), len(pairs))
	}
}

func FuzzCandidateName(f *testing.F) {
	for _, s := range [][2]string{{"istio-leader", "istiod-1"}, {"", ""}, {"a.", ".b"}, {"x..y", "Z_Z"}, {"-", "."}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, lease, identity string) {
		n := CandidateName(lease, identity)
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			t.Fatalf("CandidateName(%q, %q) = %q, invalid: %v", lease, identity, n, msgs)
		}
		if lease != identity && n == CandidateName(identity, lease) {
			t.Fatalf("CandidateName(%q, %q) equals the swapped pair's name %q", lease, identity, n)
		}
		if n != CandidateName(lease, identity) {
			t.Fatal("not stable")
		}
	})
}
