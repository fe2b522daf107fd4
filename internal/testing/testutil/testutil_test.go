package testutil

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r) // Fatalf must not return; the caller recovers
}

func run(f func(tb testing.TB)) (failed string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	f(r)
	return ""
}

func TestEventually(t *testing.T) {
	calls := 0
	if msg := run(func(tb testing.TB) {
		Eventually(tb, time.Second, func() error {
			if calls++; calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	}); msg != "" || calls != 3 {
		t.Fatalf("Eventually failed with %q after %d calls; want success at the third", msg, calls)
	}
	msg := run(func(tb testing.TB) {
		Eventually(tb, 30*time.Millisecond, Check("a leads", func() bool { return false }))
	})
	if !strings.Contains(msg, "a leads: not true") {
		t.Fatalf("Eventually failure = %q; want the last error", msg)
	}
}

func TestConsistently(t *testing.T) {
	if msg := run(func(tb testing.TB) { Consistently(tb, 30*time.Millisecond, func() error { return nil }) }); msg != "" {
		t.Fatalf("Consistently failed: %q", msg)
	}
	calls := 0
	msg := run(func(tb testing.TB) {
		Consistently(tb, time.Second, func() error {
			if calls++; calls == 2 {
				return errors.New("lost it")
			}
			return nil
		})
	})
	if !strings.Contains(msg, "lost it") || calls != 2 {
		t.Fatalf("Consistently = %q after %d calls; want a failure naming the second call's error", msg, calls)
	}
}
