package session

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func zapNop() *zap.Logger { return zap.NewNop() }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// waitFor polls cond for up to 5 s of real time (the shared watch and the
// fake clientset run on real goroutines).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wireHeartbeat gives v a heartbeat of its own, whose sends the test notes
// (noteSendAs), as startLive wires a session's view to its heartbeat.
func wireHeartbeat(v *view) *heartbeat {
	hb := &heartbeat{}
	v.sentAt, v.seqNow = hb.sentAt, hb.seqNow
	return hb
}

// sendAtEach notes a send at each time, in order, with wall and local
// clocks that agree.
func (h *heartbeat) sendAtEach(at ...time.Time) {
	for _, t := range at {
		h.noteSendAs(t, t)
	}
}

// startedMember starts a member of a session on client, timed by clk,
// stops it when the test ends, and waits for its first heartbeat to come
// back.
func startedMember(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock) *Member {
	t.Helper()
	m, err := NewMember(testConfig(client, clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Start())
	waitFor(t, "the first heartbeat to come back", func() bool { sent, _ := m.Renewed(); return !sent.IsZero() })
	return m
}
