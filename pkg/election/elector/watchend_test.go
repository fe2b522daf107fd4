package elector

import (
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// A watch that the server ends before it delivered anything (as a lagging
// connection that drops does) is given up by client-go's reflector, which
// lists again only after a back-off of up to half a minute and tells no
// error handler. The follower must count its watch broken from the end of
// the watch, not from the next list: until then nothing delivers the
// lock's changes, and a follower that trusted the watch would wait for a
// write it never sees (a lesser holder kept the election past the bound in
// session seed 900073852).
func TestFollowerCountsAnEndedWatchBrokenBeforeTheInformerListsAgain(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 4))
	var mu sync.Mutex
	lists := 0
	h.client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		lists++
		mu.Unlock()
		return false, nil, nil // the tracker answers
	})
	listed := func() int { mu.Lock(); defer mu.Unlock(); return lists }
	watches := make(chan *watch.FakeWatcher, 8)
	h.client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		watches <- w
		return true, w, nil
	})
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "the follower to know b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	(<-watches).Stop() // the server ends the watch before it delivered anything
	waitFor(t, "the follower to count its watch broken", func() bool { return !f.le.watch.Healthy() })
	if n := listed(); n != 1 {
		t.Fatalf("the watch counted as healthy until the informer listed again (%d lists), with no watch open", n)
	}
	waitFor(t, "the list after the back-off to make the watch healthy", func() bool { return listed() >= 2 && f.le.watch.Healthy() })
}
