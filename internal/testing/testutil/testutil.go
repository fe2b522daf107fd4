// Package testutil holds the few helpers every test package of meshd
// shares: waiting for a condition and asserting that one keeps holding.
package testutil

import (
	"errors"
	"testing"
	"time"
)

// PollInterval is how often Eventually and Consistently check their
// condition: often enough that a wait adds little to a measured latency,
// rarely enough not to load the API server.
const PollInterval = 10 * time.Millisecond

// Eventually calls cond every PollInterval until it returns nil, and returns
// how long that took. If cond still fails after timeout, the test fails
// with cond's last error.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(PollInterval)
	}
}

// Consistently calls cond every PollInterval for d and fails the test at
// the first error. It asserts that something keeps holding, or that
// something does not happen.
func Consistently(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("stopped holding within %v: %v", d, err)
		}
		time.Sleep(PollInterval)
	}
}

// Check turns a yes-or-no condition into one for Eventually and
// Consistently; its error is "<what>: not true".
func Check(what string, cond func() bool) func() error {
	err := errors.New(what + ": not true")
	return func() error {
		if cond() {
			return nil
		}
		return err
	}
}
