package ownstack

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCallReturnsWhatTheFunctionReturned(t *testing.T) {
	if got := Call(func() int { return 7 }); got != 7 {
		t.Fatalf("Call = %d, want 7", got)
	}
}

func TestCallWaitsForTheFunction(t *testing.T) {
	done := false
	Call(func() struct{} {
		time.Sleep(20 * time.Millisecond)
		done = true // the race detector reports it if Call does not wait
		return struct{}{}
	})
	if !done {
		t.Fatal("Call returned before the function did")
	}
}

func TestCallRaisesThePanicInTheCaller(t *testing.T) {
	defer func() {
		if r := recover(); r != "bad" {
			t.Fatalf("recovered %v, want the function's panic", r)
		}
	}()
	Call(func() int { panic("bad") })
	t.Fatal("Call returned after a panic")
}
