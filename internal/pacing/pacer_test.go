package pacing

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestAttemptsGivenUpDoNotHoldBackTheOthers starts 1000 first attempts
// together, as a program starting 1000 elections does; then the watch shows
// 900 of the locks held (another replica created them), and those give up.
// The 100 left must not wait behind the turns of those that gave up: the
// rate paces the attempts that are made. A pacer that hands out tokens
// before slots reserves one for each of the 1000 at the start, in start
// order, and the last 100 would wait about 0.9 s for theirs.
func TestAttemptsGivenUpDoNotHoldBackTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, needed = 1000, 100
		p := NewPacer()
		ctx := context.Background()
		start := time.Now()
		var (
			mu     sync.Mutex
			turns  []time.Duration // of the attempts still needed
			stop   [n]atomic.Bool
			wakeup [n]chan struct{}
			wg     sync.WaitGroup
		)
		for i := range n {
			wakeup[i] = make(chan struct{}, 1)
			wg.Go(func() {
				release := p.Turn(ctx, fmt.Sprintf("replica-a\x00lock-%d", i), wakeup[i], stop[i].Load)
				defer release()
				if i >= n-needed {
					mu.Lock()
					turns = append(turns, time.Since(start))
					mu.Unlock()
				}
			})
		}
		synctest.Wait() // every attempt started and waits, or had its turn
		for i := range n - needed {
			stop[i].Store(true)
			wakeup[i] <- struct{}{}
		}
		wg.Wait()
		if len(turns) != needed {
			t.Fatalf("%d of the %d attempts still needed had their turn", len(turns), needed)
		}
		var last time.Duration
		for _, d := range turns {
			last = max(last, d)
		}
		// 100 attempts at 1000 a second take 100 ms; the tokens that the
		// attempts holding a slot had reserved when they gave up are not
		// all given back by the bucket, which may add up to as many
		// again. Far below the 0.9 s of a pacer that reserves at the start.
		if limit := 2 * needed * time.Second / FirstAttemptQPS; last > limit {
			t.Fatalf("the last attempt still needed had its turn %v after the start, want at most %v", last, limit)
		}
	})
}

// TestTurnsKeepTheRate checks that the attempts made are paced: 400
// attempts that are all needed take at least (400 - burst) / rate.
func TestTurnsKeepTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 400
		p := NewPacer()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				release := p.Turn(context.Background(), fmt.Sprintf("lock-%d", i), nil, func() bool { return false })
				release()
			})
		}
		wg.Wait()
		want := (n - FirstAttemptBurst) * time.Second / FirstAttemptQPS
		if took := time.Since(start); took < want-time.Millisecond {
			t.Fatalf("%d attempts took %v, want at least %v at %d a second after a burst of %d", n, took, want, FirstAttemptQPS, FirstAttemptBurst)
		}
	})
}
