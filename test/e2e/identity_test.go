package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testutil"
)

// generatedIdentity is what meshd picks when given no identity.
var generatedIdentity = regexp.MustCompile(`^.+_[0-9a-f]{8}$`)

// Two "meshd run" on one host with no --identity and no POD_NAME pick
// different identities, never both report leading the same election, and
// "meshd status" shows the holder's identity.
func TestProcessesWithoutIdentityNeverShareALock(t *testing.T) {
	m := newMesh(t)
	noPodName := func(o *meshdproc.Options) { o.Env = append(o.Env, "POD_NAME=") }
	a := m.start("anon-a", "stable", withoutIdentity(), noPodName)
	b := m.start("anon-b", "stable", withoutIdentity(), noPodName)
	locks := []string{namespaceLock, statusLock, revisionLock("stable")}

	identities := map[string]string{}
	for _, p := range []*meshdproc.Process{a, b} {
		testutil.Eventually(t, 10*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			els, err := p.Elections(ctx)
			if err != nil || len(els) == 0 {
				return fmt.Errorf("%s: %d elections, %v", p.Name(), len(els), err)
			}
			for _, e := range els {
				if e.Identity != els[0].Identity {
					return fmt.Errorf("%s: identities %q and %q in one process", p.Name(), e.Identity, els[0].Identity)
				}
			}
			identities[p.Name()] = els[0].Identity
			return nil
		})
	}
	if !generatedIdentity.MatchString(identities["anon-a"]) || !generatedIdentity.MatchString(identities["anon-b"]) ||
		identities["anon-a"] == identities["anon-b"] {
		t.Fatalf("identities %v: want two different <hostname>_<suffix>", identities)
	}

	// Over several lease periods (ttl 2s), including the first acquisitions,
	// no lock has two processes reporting leading at once.
	deadline := time.Now().Add(6 * time.Second)
	looks := 0
	for time.Now().Before(deadline) {
		s, err := m.look()
		if err != nil {
			t.Fatal(err)
		}
		for _, lock := range locks {
			if l := s.leaders[lock]; len(l) > 1 {
				t.Fatalf("%s: %v both report leading", lock, l)
			}
		}
		looks++
		time.Sleep(20 * time.Millisecond)
	}
	for _, lock := range locks {
		holder := m.holder(lock)
		if holder != identities["anon-a"] && holder != identities["anon-b"] {
			t.Errorf("%s held by %q, not one of %v", lock, holder, identities)
		}
	}
	t.Logf("%d looks, never two leaders; identities %v", looks, identities)

	table := m.meshdStatus()
	for _, lock := range locks {
		if !strings.Contains(table, m.holder(lock)) {
			t.Errorf("meshd status does not show %s's holder %q:\n%s", lock, m.holder(lock), table)
		}
	}
}
