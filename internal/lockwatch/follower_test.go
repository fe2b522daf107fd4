package lockwatch

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The cache a hub replays to an elector that subscribes (every Run does) is
// no sign of health: the hub hands it over even while the shared watch is
// broken and no watch is open. Counted healthy, the elector decided from that
// stale object, and after each conflict waited for a delivery that could
// not come, instead of reading the lock (in the simulation an entitled
// candidate waited 4.6 s). A live delivery is, as the hub counts it:
// without it an elector that subscribed to a new watch waited for the
// hub's poll of its sync before it acted on a release it had been
// delivered.
func TestJoiningReplayDoesNotMakeTheWatchHealthy(t *testing.T) {
	w := NewFollower(nil)
	w.joining.Store(true)
	w.Deliver(&corev1.ConfigMap{}, false)
	if w.Healthy() {
		t.Fatal("the cache replayed to a joining watch made it healthy")
	}
	w.joining.Store(false)
	w.Deliver(&corev1.ConfigMap{}, false)
	if !w.Healthy() {
		t.Fatal("a live delivery did not make the watch healthy")
	}
	w.SetHealth(false)
	w.SetHealth(true)
	if !w.Healthy() {
		t.Fatal("the hub's report of health did not")
	}
}

// Covers credits a write in two ways: the watch has not broken since before
// it (by epoch), or the version the write produced is the one delivered
// last, live, in the current period of health. Anything else covers nothing.
func TestCoversAWriteHandedOverInTheCurrentPeriod(t *testing.T) {
	at := func(v string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		cm.ResourceVersion = v
		return cm
	}
	for _, tc := range []struct {
		name string
		// steps drive a follower healthy in epoch 1 at the start; the
		// write to credit produced version "7" while epoch was noted.
		steps func(f *Follower)
		epoch uint64
		want  bool
	}{
		{"unbroken since the epoch noted before the write", func(f *Follower) {}, 1, true},
		{"broke since; nothing delivered", func(f *Follower) { f.SetHealth(false); f.SetHealth(true) }, 1, false},
		{"broke during the write; the written version delivered after", func(f *Follower) {
			f.SetHealth(false)
			f.Deliver(at("7"), false)
		}, 0, true},
		{"the written version delivered live in the current period", func(f *Follower) { f.Deliver(at("7"), false) }, 0, true},
		{"a later version delivered after it", func(f *Follower) {
			f.Deliver(at("7"), false)
			f.Deliver(at("8"), false)
		}, 0, false},
		{"the written version delivered, then a break", func(f *Follower) {
			f.Deliver(at("7"), false)
			f.SetHealth(false)
			f.SetHealth(true)
		}, 0, false},
		{"the written version replayed to a joining subscriber", func(f *Follower) {
			f.SetHealth(false)
			f.joining.Store(true)
			f.Deliver(at("7"), false)
			f.joining.Store(false)
			f.SetHealth(true)
		}, 0, false},
		{"the object deleted after the written version", func(f *Follower) {
			f.Deliver(at("7"), false)
			f.Deliver(at("7"), true)
		}, 0, false},
		{"unhealthy", func(f *Follower) {
			f.Deliver(at("7"), false)
			f.SetHealth(false)
		}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFollower(nil)
			f.SetHealth(true)
			if f.Epoch() != 1 {
				t.Fatalf("epoch %d at the start", f.Epoch())
			}
			tc.steps(f)
			if got := f.Covers(tc.epoch, "7"); got != tc.want {
				t.Fatalf("Covers(%d, 7) = %v, want %v", tc.epoch, got, tc.want)
			}
			if f.Covers(tc.epoch, "") && tc.epoch == 0 {
				t.Fatal("an empty version was covered")
			}
		})
	}
}
