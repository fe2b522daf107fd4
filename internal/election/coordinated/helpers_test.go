package coordinated

import (
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testNS    = "mesh"
	testLease = "istio-leader"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// cand describes a test candidate.
type cand struct {
	name, key string
	preempts  bool
	version   string
	renew     time.Time // zero: never renewed
	ping      time.Time
	strategy  coordinationv1.CoordinatedLeaseStrategy
}

// leaseDur is every test candidate's lease duration.
const leaseDur = 10 * time.Second

func (c cand) object() *coordinationv1beta1.LeaseCandidate {
	strategy := c.strategy
	if strategy == "" {
		strategy = Strategy
	}
	v := c.version
	if v == "" {
		v = "1.0.0"
	}
	lc := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: testNS, Annotations: map[string]string{
			IdentityAnnotation:      "id-" + c.name,
			HolderKeyAnnotation:     c.key,
			PreemptsAnnotation:      strconv.FormatBool(c.preempts),
			LeaseDurationAnnotation: strconv.Itoa(int(leaseDur / time.Second)),
		}},
		Spec: coordinationv1beta1.LeaseCandidateSpec{
			LeaseName: testLease, Strategy: strategy, BinaryVersion: v, EmulationVersion: v,
		},
	}
	if !c.renew.IsZero() {
		lc.Spec.RenewTime = &metav1.MicroTime{Time: c.renew}
	}
	if !c.ping.IsZero() {
		lc.Spec.PingTime = &metav1.MicroTime{Time: c.ping}
	}
	return lc
}

func (c cand) candidate(now time.Time) Candidate { return candidateFrom(c.object(), now) }

// heldLease is a Lease held by holder with key, renewed at renew.
func heldLease(holder, key string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: testLease, Namespace: testNS, Annotations: map[string]string{
			resourcelock.LeaseHolderKeyAnnotation: key,
			"example.com/foreign":                 "kept",
		}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(int32(leaseDur / time.Second)),
			AcquireTime:          &metav1.MicroTime{Time: renew},
			RenewTime:            &metav1.MicroTime{Time: renew},
			LeaseTransitions:     ptr.To(int32(4)),
		},
	}
}
