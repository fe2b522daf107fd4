package session

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
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
