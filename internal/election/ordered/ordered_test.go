package ordered

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestFirstTakesTheReadyChannelsInTheOrderGiven(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b, c := make(chan struct{}, 1), make(chan time.Time, 1), make(chan struct{}, 1)
	c <- struct{}{}
	b <- time.Time{}
	a <- struct{}{}
	var got []int
	for range 3 {
		got = append(got, First3(a, b, c))
	}
	if got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("took %v, want [0 1 2]: the order given, not the order of the sends", got)
	}
	// Many rounds: a random pick among ready channels would show here.
	for range 1000 {
		b <- time.Time{}
		c <- struct{}{}
		if i := First3(a, b, c); i != 1 {
			t.Fatalf("took channel %d with b and c ready, want b (1)", i)
		}
		<-c
	}
}

func TestFirstBlocksUntilOneIsReadyAndIgnoresNilChannels(t *testing.T) {
	defer goleak.VerifyNone(t)
	var never chan struct{}
	late := make(chan time.Time)
	go func() {
		time.Sleep(10 * time.Millisecond)
		late <- time.Time{}
	}()
	if i := First3(never, late, make(chan int)); i != 1 {
		t.Fatalf("woke on channel %d, want the one that became ready (1)", i)
	}
}

func TestFirstReportsAClosedChannelAsReady(t *testing.T) {
	done := make(chan struct{})
	close(done)
	if i := First4(make(chan int), make(chan int), done, done); i != 2 {
		t.Fatalf("took %d, want the first closed channel (2)", i)
	}
}

// TestEveryPlaceIsTakenReadyAndAfterBlocking makes each place of each
// function in turn the only ready channel, once before the call and once
// after the call has blocked, and checks that its index comes back: a
// case wired to the wrong index, or a channel left out of a select,
// fails here.
func TestEveryPlaceIsTakenReadyAndAfterBlocking(t *testing.T) {
	defer goleak.VerifyNone(t)
	first := map[int]func(c []chan struct{}) int{
		3: func(c []chan struct{}) int { return First3(c[0], c[1], c[2]) },
		4: func(c []chan struct{}) int { return First4(c[0], c[1], c[2], c[3]) },
		6: func(c []chan struct{}) int { return First6(c[0], c[1], c[2], c[3], c[4], c[5]) },
	}
	for n, call := range first {
		for place := range n {
			for _, blocked := range []bool{false, true} {
				chans := make([]chan struct{}, n)
				for i := range chans {
					chans[i] = make(chan struct{}, 1)
				}
				if blocked {
					go func() {
						time.Sleep(time.Millisecond)
						chans[place] <- struct{}{}
					}()
				} else {
					chans[place] <- struct{}{}
				}
				if got := call(chans); got != place {
					t.Fatalf("First%d woke on %d, want %d (sent after blocking: %v)", n, got, place, blocked)
				}
			}
		}
	}
}

func TestFirstAllocatesNothing(t *testing.T) {
	a, b := make(chan struct{}, 1), make(chan time.Time, 1)
	var never <-chan time.Time
	allocs := testing.AllocsPerRun(1000, func() {
		b <- time.Time{}
		if First3(a, never, b) != 2 {
			t.Fatal("did not take b")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call, want 0", allocs)
	}
}

// BenchmarkFirst4Ready measures the wait of a follower's loop when its
// timer has fired.
func BenchmarkFirst4Ready(b *testing.B) {
	done, events, trigger := make(chan struct{}), make(chan struct{}), make(chan struct{})
	timer := make(chan time.Time, 1)
	b.ReportAllocs()
	for b.Loop() {
		timer <- time.Time{}
		First4(done, events, trigger, timer)
	}
}
