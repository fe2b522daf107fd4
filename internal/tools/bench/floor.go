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

// floorSamples is how many floor samples are taken per latency trial: they
// are cheap, and the ratio's denominator should be steadier than its
// numerator.
const floorSamples = 3

// floorPause bounds the random pause between floor samples, so that each
// finds the API server as idle as a handover trial does, and the samples do
// not fall into a rhythm with the other clients' writes.
const floorPause = 200 * time.Millisecond

// RunFloor measures the floor: floorSamples x cfg.Trials times, one client
// updates a Lease that a second client watches, and the second updates it
// as soon as the event arrives, as a follower taking a released lock does.
// Both clients are fresh clientsets without client-side rate limits, like
// every candidate's.
func RunFloor(ctx context.Context, env *Env, cfg Config) FloorResult {
	var res FloorResult
	if err := runFloor(ctx, env, cfg, &res); err != nil {
		res.Errors = append(res.Errors, err.Error())
		cfg.logf("  floor: %v", err)
	}
	return res
}

func runFloor(ctx context.Context, env *Env, cfg Config, res *FloorResult) error {
	ns, err := env.NewNamespace(ctx, "floor")
	if err != nil {
		return err
	}
	writer, err := newClient(env.Config, NewCounter())
	if err != nil {
		return err
	}
	follower, err := newClient(env.Config, NewCounter())
	if err != nil {
		return err
	}
	const name = "floor"
	leases := writer.CoordinationV1().Leases(ns)
	lease, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the Lease: %w", err)
	}
	w, err := follower.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: lease.ResourceVersion,
	})
	if err != nil {
		return fmt.Errorf("watch the Lease: %w", err)
	}
	defer w.Stop()
	n := floorSamples * cfg.Trials
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if err := sleep(ctx, rand.N(floorPause)); err != nil {
			return err
		}
		lease, err = floorSample(ctx, writer, follower, w, lease, i, res)
		if err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
	}
	cfg.logf("  floor: update %s, watched update %s, update relayed through a watch %s (medians of %d)",
		fmtMS(medianOf(res.Update)), fmtMS(medianOf(res.Watched)), fmtMS(medianOf(res.Relay)), len(res.Relay))
	return nil
}

// floorSample makes one release-then-acquire exchange on lease: the
// writer's UPDATE, its event at the follower's watch, the follower's
// UPDATE. It returns the Lease as the follower's write left it.
func floorSample(ctx context.Context, writer, follower kubernetes.Interface, w watch.Interface, lease *coordinationv1.Lease, i int, res *FloorResult) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	holder := fmt.Sprintf("writer-%d", i)
	lease = lease.DeepCopy()
	lease.Spec.HolderIdentity = &holder
	sent := time.Now()
	written, err := writer.CoordinationV1().Leases(lease.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
	answered := time.Now()
	if err != nil {
		return nil, fmt.Errorf("update: %w", err)
	}
	seen, err := awaitVersion(ctx, w, written.ResourceVersion)
	if err != nil {
		return nil, err
	}
	seenAt := time.Now()
	next := seen.DeepCopy()
	successor := fmt.Sprintf("follower-%d", i)
	next.Spec.HolderIdentity = &successor
	relayed, err := follower.CoordinationV1().Leases(lease.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	done := time.Now()
	if err != nil {
		return nil, fmt.Errorf("follower's update: %w", err)
	}
	// The follower's own write comes back through its watch too; take it
	// now, so that the next sample waits for its own event only.
	if _, err := awaitVersion(ctx, w, relayed.ResourceVersion); err != nil {
		return nil, err
	}
	res.Update = append(res.Update, answered.Sub(sent))
	res.Watched = append(res.Watched, seenAt.Sub(sent))
	res.Relay = append(res.Relay, done.Sub(sent))
	return relayed, nil
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
