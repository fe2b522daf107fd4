package elector

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func emptiedConfigMap(uid, rv string, rec *resourcelock.Record) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns, UID: types.UID(uid), ResourceVersion: rv}}
	if rec != nil {
		cm.Annotations = map[string]string{resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(*rec))}
	}
	return cm
}

// TestAnObjectCreatedAfterADeletionStartsTheEmptiedCountAfresh: the
// emptied-lock rule restarts its count of a lease for an object found
// where the last look found none. A deletion the watch delivers is such a
// look, as a read that finds the object missing is: an object created
// after it does not go on with the count of the emptied object before,
// into which a holder this candidate never saw may have written.
func TestAnObjectCreatedAfterADeletionStartsTheEmptiedCountAfresh(t *testing.T) {
	for _, viaWatch := range []bool{false, true} {
		name := "deletion read by a GET"
		if viaWatch {
			name = "deletion delivered by the watch"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			le := h.elector("c", "", nil, nil)
			lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "c"})
			if err != nil {
				t.Fatal(err)
			}
			le, err = New(Config{
				Name: lockName, Lock: lock,
				LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
				Callbacks: le.cfg.Callbacks, Watch: true, Clock: h.clock,
			})
			if err != nil {
				t.Fatal(err)
			}
			le.watch.MarkHealthy(true)
			hrec := held("h", "", 4)
			le.watch.ingestOne(emptiedConfigMap("a", "1", &hrec), false) // t0: h holds object a
			h.clock.Step(time.Second)
			b := emptiedConfigMap("b", "3", nil)
			le.watch.ingestOne(b, false) // t0+1: re-created empty as object b: counted from t0+1
			h.clock.Step(time.Second)
			// t0+2: b is gone (someone may have written a record into b
			// meanwhile that this candidate never saw).
			if viaWatch {
				le.watch.ingestOne(cache.DeletedFinalStateUnknown{Key: ns + "/" + lockName, Obj: b}, true)
			} else {
				le.noteEmpty(nil, h.clock.Now()) // a GET answered NotFound
			}
			h.clock.Step(time.Second)
			le.watch.ingestOne(emptiedConfigMap("e", "7", nil), false) // t0+3: object e, created since, empty
			got := le.loop.emptied.WakeAt(h.clock.Now(), le.cfg.LeaseDuration)
			if want := t0.Add(3*time.Second + 4*time.Second); !got.Equal(want) {
				t.Fatalf("object e may be taken at t0+%v, want t0+%v (a lease from its first sight)", got.Sub(t0), want.Sub(t0))
			}
		})
	}
}
