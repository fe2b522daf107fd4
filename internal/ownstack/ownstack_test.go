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

// framesOf uses about 300 bytes of stack per level: n levels deep, about
// n × 300 bytes in all.
//
//go:noinline
func framesOf(n int) int {
	var buf [256]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return int(buf[0])
	}
	return framesOf(n-1) + int(buf[n%len(buf)])
}

// The price of Call: a goroutine start, and the growth of its stack up to
// what the function needs (a copy at every doubling), which a long-lived
// goroutine pays once. An API request and a decision on a record need
// several KiB.
func BenchmarkCall(b *testing.B) {
	for _, c := range []struct {
		name   string
		levels int
	}{{"1KiB", 3}, {"16KiB", 55}, {"32KiB", 110}} {
		b.Run(c.name+"/own-goroutine", func(b *testing.B) {
			for b.Loop() {
				Call(func() int { return framesOf(c.levels) })
			}
		})
		b.Run(c.name+"/caller's-stack", func(b *testing.B) {
			for b.Loop() {
				framesOf(c.levels)
			}
		})
	}
}
