package elector

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Every entry an elector writes names its election, lock and identity;
// entries below the logger's level are not written.
func TestElectorLogEntriesNameTheElection(t *testing.T) {
	h := newHarness(t)
	core, logs := observer.New(zapcore.InfoLevel)
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock, Logger: zap.New(core),
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		Clock:     h.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	le.log.Debug("not written")
	if !le.tryAcquire(context.Background()) {
		t.Fatal("the first attempt did not acquire a free lock")
	}
	entries := logs.All()
	if len(entries) == 0 {
		t.Fatal("no entry written")
	}
	for _, e := range entries {
		f := e.ContextMap()
		if e.Level < zapcore.InfoLevel || f["election"] != lockName || f["lock"] != lock.Describe() || f["identity"] != "a" {
			t.Errorf("entry %q at %v has fields %v; want election %s, lock %s, identity a at info or above",
				e.Message, e.Level, f, lockName, lock.Describe())
		}
	}
}
