package multicluster

import (
	"context"
	"testing"
	"time"
)

// Two primaries, each the other's remote: whichever starts first leads the
// namespace election of both clusters (of the other one with a remote
// key), and the other takes its own cluster back as soon as it starts; in
// both start orders, the local instance ends up leading in its cluster.
func TestTwoPrimaryLocalWinsInBothStartOrders(t *testing.T) {
	for _, order := range []string{"east first", "west first"} {
		t.Run(order, func(t *testing.T) {
			m := newMesh(t)
			m.plugRoot(m.west, m.root) // a shared root, as multi-primary needs
			m.linkRemote(m.east, m.west)
			m.linkRemote(m.west, m.east)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wait := m.sample(ctx)

			first, second := m.east, m.west
			if order == "west first" {
				first, second = m.west, m.east
			}
			firstName, secondName := "meshd-"+first.id, "meshd-"+second.id
			m.start(firstName, first)
			m.waitLeader(first, firstName, "default", 10*time.Second)
			m.waitLeader(second, firstName, "^default", 10*time.Second)
			m.waitPublished(second, m.ns, m.root, 10*time.Second)

			started := time.Now()
			m.start(secondName, second)
			ready := time.Since(started)
			m.waitLeader(second, secondName, "default", 10*time.Second)
			took := time.Since(started)
			t.Logf("%s took its own cluster from the remote instance %v after it was started (ready after %v)",
				secondName, took.Round(time.Millisecond), ready.Round(time.Millisecond))
			if took > ready+ttl {
				t.Errorf("%s took its cluster back %v after it was started, want within the lease (%v) of being ready", secondName, took, ttl)
			}
			// The first keeps its own cluster, and stays a follower in the
			// other one.
			m.waitLeader(first, firstName, "default", time.Second)
			time.Sleep(ttl)
			m.waitLeader(second, secondName, "default", time.Second)
			m.waitLeader(first, firstName, "default", time.Second)
			cancel()
			wait()
			m.checkNoOverlap()
		})
	}
}

// A local instance that crashes loses its cluster to the remote one once
// its lease has run out; back, it takes its cluster back at once. No two
// instances run a cluster's controller at the same time.
func TestTwoPrimaryFailoverToRemoteAndBack(t *testing.T) {
	m := newMesh(t)
	m.plugRoot(m.west, m.root)
	m.linkRemote(m.east, m.west)
	m.linkRemote(m.west, m.east)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := m.sample(ctx)

	east := m.start("meshd-east", m.east)
	m.start("meshd-west", m.west)
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	m.waitLeader(m.west, "meshd-west", "default", 10*time.Second)

	killed := time.Now()
	m.kill(east)
	m.waitLeader(m.east, "meshd-west", "^default", 3*ttl)
	took := time.Since(killed)
	t.Logf("east's lock went to the remote instance %v after the kill (lease %v)", took.Round(time.Millisecond), ttl)
	if took > ttl+time.Second {
		t.Errorf("failover to the remote took %v, want at most the lease (%v) plus 1s", took, ttl)
	}
	// The remote instance publishes the mesh root in east while it leads.
	newNS := "app-" + m.ns[len(m.ns)-8:]
	createNamespace(t, m.east, newNS)
	m.waitPublished(m.east, newNS, m.root, 10*time.Second)

	restarted := time.Now()
	if err := east.Restart(); err != nil {
		t.Fatal(err)
	}
	m.waitReady(east)
	ready := time.Since(restarted)
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	back := time.Since(restarted)
	t.Logf("the local instance took east back %v after it was restarted (ready after %v)", back.Round(time.Millisecond), ready.Round(time.Millisecond))
	if back > ready+ttl {
		t.Errorf("taking the cluster back took %v after the restart, want within the lease (%v) of being ready", back, ttl)
	}
	m.waitLeader(m.west, "meshd-west", "default", time.Second)
	cancel()
	wait()
	m.checkNoOverlap()
}
