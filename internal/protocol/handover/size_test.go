package handover

import (
	"testing"
	"time"
	"unsafe"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Every election of a process carries a Protocol, and most never ask a
// holder (followers that are not entitled, every leader): what asking
// needs is made on the first request, so that a process of 5000 elections
// does not carry 5000 ask states of 176 bytes. Triggered, AskedAt and WakeAt
// make none, and a Protocol fits the allocator's 128-byte size class.
func TestACandidateThatNeverAsksCarriesNoAskState(t *testing.T) {
	lock, err := resourcelock.NewLeaseLock(fake.NewClientset().CoordinationV1(), "ns", "lock", resourcelock.Config{Identity: "me"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Name: "lock", Lock: lock, Grace: 2 * time.Second, LeaseDuration: 4 * time.Second, RetryPeriod: time.Second})
	p.Triggered()
	if !p.AskedAt().IsZero() || !p.WakeAt(time.Now()).IsZero() {
		t.Fatal("a candidate that never asked reports a request or a wake-up")
	}
	if p.ask != nil {
		t.Fatal("Triggered, AskedAt or WakeAt made an ask state")
	}
	if size := unsafe.Sizeof(*p); size > 128 {
		t.Fatalf("a Protocol is %d bytes, over the 128-byte size class", size)
	}
}
