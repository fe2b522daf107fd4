package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// FloorResult is what the API server itself allows a handover, measured on
// a Lease with no elector involved: the floor a graceful handover is
// compared with.
type FloorResult struct {
	// Update is the round trip of one UPDATE of a Lease.
	Update Durations
	// Watched is from sending one UPDATE to its event reaching another
	// client's watch: the one-write floor, what a handover that names its
	// successor needs.
	Watched Durations
	// Relay is from sending one UPDATE to the return of a second client's
	// UPDATE, sent as soon as its watch delivered the first: the
	// release-then-acquire floor, what a handover needs whose releasing
	// holder does not know its successor.
	Relay  Durations
	Errors []string
}

// floorSamples is how many floor samples are taken per handover trial:
// they are cheap, and the ratio's denominator should be steadier than its
// numerator.
const floorSamples = 3

// floorProbe takes floor samples: one client updates a Lease that a second
// client watches, and the second updates it as soon as the event arrives,
// as a follower taking a released lock does. Both are fresh clientsets
// without client-side rate limits, like every candidate's. The handover
// trials take their samples during their steady pause, so that floor and
// handover are measured under the same load of the machine.
type floorProbe struct {
	writer, follower kubernetes.Interface
	w                watch.Interface
	lease            *coordinationv1.Lease
	n                int
	res              FloorResult
}

// newFloorProbe creates the probe's namespace, Lease, clients and watch.
func newFloorProbe(ctx context.Context, env *Env) (*floorProbe, error) {
	ns, err := env.NewNamespace(ctx, "floor")
	if err != nil {
		return nil, err
	}
	p := &floorProbe{}
	if p.writer, err = newClient(env.Config, NewCounter()); err != nil {
		return nil, err
	}
	if p.follower, err = newClient(env.Config, NewCounter()); err != nil {
		return nil, err
	}
	const name = "floor"
	p.lease, err = p.writer.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create the floor's Lease: %w", err)
	}
	p.w, err = p.follower.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: p.lease.ResourceVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("watch the floor's Lease: %w", err)
	}
	return p, nil
}

// stop ends the probe's watch.
func (p *floorProbe) stop() { p.w.Stop() }

// sampleDuring takes floorSamples samples spread over d (each after a
// random part of what is left) and returns when d has passed.
func (p *floorProbe) sampleDuring(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for i := 0; i < floorSamples; i++ {
		if left := time.Until(end); left > 0 {
			if err := sleep(ctx, rand.N(left/time.Duration(floorSamples-i))); err != nil {
				return err
			}
		}
		if err := p.sample(ctx); err != nil {
			p.res.Errors = append(p.res.Errors, err.Error())
			return fmt.Errorf("floor sample: %w", err)
		}
	}
	return sleep(ctx, time.Until(end))
}

// sample makes one release-then-acquire exchange: the writer's UPDATE, its
// event at the follower's watch, the follower's UPDATE.
func (p *floorProbe) sample(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	holder := fmt.Sprintf("writer-%d", p.n)
	successor := fmt.Sprintf("follower-%d", p.n)
	p.n++
	lease := p.lease.DeepCopy()
	lease.Spec.HolderIdentity = &holder
	sent := time.Now()
	written, err := p.writer.CoordinationV1().Leases(lease.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
	answered := time.Now()
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	seen, err := awaitVersion(ctx, p.w, written.ResourceVersion)
	if err != nil {
		return err
	}
	seenAt := time.Now()
	next := seen.DeepCopy()
	next.Spec.HolderIdentity = &successor
	relayed, err := p.follower.CoordinationV1().Leases(lease.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	done := time.Now()
	if err != nil {
		return fmt.Errorf("the follower's update: %w", err)
	}
	// The follower's own write comes back through its watch too; take it
	// now, so that the next sample waits for its own event only.
	if _, err := awaitVersion(ctx, p.w, relayed.ResourceVersion); err != nil {
		return err
	}
	p.res.Update = append(p.res.Update, answered.Sub(sent))
	p.res.Watched = append(p.res.Watched, seenAt.Sub(sent))
	p.res.Relay = append(p.res.Relay, done.Sub(sent))
	p.lease = relayed
	return nil
}

// awaitVersion waits for w to deliver the Lease at resourceVersion rv.
func awaitVersion(ctx context.Context, w watch.Interface, rv string) (*coordinationv1.Lease, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for version %s on the watch: %w", rv, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, errors.New("the watch closed")
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			if !isLease {
				return nil, fmt.Errorf("the watch delivered %s %T", ev.Type, ev.Object)
			}
			if l.ResourceVersion == rv {
				return l, nil
			}
		}
	}
}
