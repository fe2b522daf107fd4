package election

import (
	"os"
	"regexp"
	"testing"
)

func TestNewIdentityIsUniquePerCall(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	pattern := regexp.MustCompile("^" + regexp.QuoteMeta(host) + "_[0-9a-f]{16}$")
	seen := map[string]bool{}
	for range 1000 {
		id := NewIdentity()
		if !pattern.MatchString(id) {
			t.Fatalf("identity %q does not match %s", id, pattern)
		}
		if seen[id] {
			t.Fatalf("identity %q returned twice", id)
		}
		seen[id] = true
	}
}

func TestEmptyIdentityBecomesUnique(t *testing.T) {
	a, err := NewLeaderElection("istio-system", "", NamespaceController, "", nil, WithEnabled(false))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLeaderElection("istio-system", "", NamespaceController, "", nil, WithEnabled(false))
	if err != nil {
		t.Fatal(err)
	}
	if a.Identity() == "" || a.Identity() == b.Identity() {
		t.Fatalf("identities %q and %q: want two different, non-empty ones", a.Identity(), b.Identity())
	}
}
