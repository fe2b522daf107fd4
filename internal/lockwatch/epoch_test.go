package lockwatch

import (
	"sync"
	"testing"
)

// Epoch is 0 exactly while unhealthy, changes at
// every heal, and never returns to an earlier value, whatever the order of
// concurrent SetHealth, Deliver, MarkHealthy and Take (run with -race).
func TestEpochNeverRepeatsUnderConcurrentHealthChanges(t *testing.T) {
	f := NewFollower(nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch i {
				case 0:
					f.SetHealth(false)
				case 1:
					f.Deliver(i, false)
				case 2:
					f.MarkHealthy(true)
					f.MarkHealthy(false)
				case 3:
					f.Take()
				}
			}
		}(i)
	}
	var last uint64
	for n := 0; n < 20000; n++ {
		e := f.Epoch()
		if e != 0 {
			if e < last {
				t.Fatalf("epoch went back from %d to %d", last, e)
			}
			last = e
		}
	}
	close(stop)
	wg.Wait()
	f.SetHealth(false)
	if f.Epoch() != 0 || f.Covers(0, "") || f.Covers(last, "") {
		t.Fatal("an unhealthy follower claims an epoch")
	}
	f.SetHealth(true)
	if e := f.Epoch(); e <= last || !f.Covers(e, "") {
		t.Fatalf("heal gave epoch %d after %d", e, last)
	}
}
