package session

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Many elections of one process joining and leaving its sessions at once
// (two ttls, so two sessions) keep the registry's count right: every
// member sees a session while it is in, the last to leave ends it (its
// Lease is gone), and nothing keeps running afterwards.
func TestSessionsStartAndStopConcurrently(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	client := fake.NewClientset()
	sessions := NewSessions(nil)
	cfg := func(lease time.Duration) Config {
		return Config{Client: client, Namespace: "ns", Identity: "p",
			LeaseDuration: lease, RenewDeadline: lease / 2, RetryPeriod: lease / 4, Sessions: sessions}
	}
	var members []*Member
	for i := range 16 {
		m, err := NewMember(cfg(time.Duration(2+i%2) * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(members))
	for _, m := range members {
		wg.Go(func() {
			for range 20 {
				stop := m.Start()
				if m.Ref() == "" {
					errs <- fmt.Errorf("member of %s has no session while in it", m.LeaseName())
				}
				if _, token, ok := ParseRef(m.Ref()); !ok || token == "" {
					errs <- fmt.Errorf("member ref %q is not a session reference", m.Ref())
				}
				stop()
				stop() // idempotent
				if m.Ref() != "" {
					errs <- fmt.Errorf("member of %s still names %q after it left", m.LeaseName(), m.Ref())
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if left := sessions.Running(); left != 0 {
		t.Fatalf("%d sessions still registered after every member left", left)
	}
	// A session that lived long enough to write its Lease deleted it when
	// its last member left.
	stop := members[0].Start()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, current := members[0].Renewed(); current {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session never renewed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if _, err := client.CoordinationV1().Leases("ns").Get(context.Background(), members[0].LeaseName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("session Lease after its last member left: %v; want it deleted", err)
	}
}
