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
