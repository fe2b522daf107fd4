package coordinated

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// retryAfterError is how soon a Lease is looked at again after a failed
// read or write that no event will announce.
const retryAfterError = time.Second

// reconcile decides and acts for one Lease and returns when to look again.
func (c *Coordinator) reconcile(ctx context.Context, name string) time.Time {
	cands := c.roster.Candidates(name)
	if !coordinated(cands) {
		delete(c.observed, name)
		return time.Time{}
	}
	now := c.cfg.Clock.Now()
	lease, err := c.leases.Get(name)
	if apierrors.IsNotFound(err) {
		lease, err = nil, nil
	}
	if err != nil {
		c.log.Warn("reading the lease from the cache failed", zap.String("lease", name), zap.Error(err))
		return now.Add(retryAfterError)
	}
	v := view{
		now: now, lease: lease, cands: cands, defaultRevision: c.cfg.Default(),
		pinged: c.pinged, ackTimeout: c.cfg.AckTimeout,
	}
	var gone bool
	v.vacant, v.expiresAt, gone = c.observe(name, lease, now)
	if gone {
		// The object was deleted, or re-created without a record, while
		// its holder's lease runs: not a release. The holder may still
		// work; look again when its lease has run out.
		return v.expiresAt
	}
	p := decide(v)
	if err := c.execute(ctx, name, v, p); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			c.log.Debug("lease changed meanwhile; deciding again on the next event", zap.String("lease", name), zap.Error(err))
		} else {
			c.log.Warn("coordinating the lease failed", zap.String("lease", name), zap.Error(err))
		}
		return earliest(p.wake, now.Add(retryAfterError))
	}
	return p.wake
}

// observe records when this process last saw the Lease's record change and
// returns whether it is vacant and, if held, when it expires. A Lease that
// is missing, or has no holder, is vacant when its holder released it (wrote
// an empty holder into the same object), when no holder was seen, or once
// the last holder's lease has run out by this process's observation; until
// then gone reports that its holder may still be working: deleting or
// re-creating the object (kubectl replace --force, a GitOps tool, or the API
// server's own controller re-creating a missing Lease without a holder) is
// never a release.
func (c *Coordinator) observe(name string, lease *coordinationv1.Lease, now time.Time) (vacant bool, expiresAt time.Time, gone bool) {
	if lease == nil || ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		obs, ok := c.observed[name]
		released := lease != nil && ok && lease.UID == obs.uid
		if ok && !released {
			if end := obs.at.Add(obs.lease); now.Before(end) {
				return false, end, true
			}
		}
		delete(c.observed, name)
		return true, time.Time{}, false
	}
	var renew int64
	if lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.UnixNano()
	}
	record := fmt.Sprintf("%s|%d|%d", *lease.Spec.HolderIdentity, renew, ptr.Deref(lease.Spec.LeaseTransitions, 0))
	obs, ok := c.observed[name]
	leaseDuration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
	if !ok || obs.record != record {
		obs = observation{record: record, at: now}
	}
	obs.uid, obs.lease = lease.UID, leaseDuration
	c.observed[name] = obs
	expiresAt = obs.at.Add(leaseDuration)
	return expiresAt.Before(now), expiresAt, false
}

// execute carries out p: pings first, then at most one write of the Lease.
func (c *Coordinator) execute(ctx context.Context, name string, v view, p plan) error {
	for _, cand := range p.ping {
		c.sendPing(ctx, cand, v.now)
	}
	c.prunePings(v.now)
	switch {
	case p.assign != nil:
		return c.assign(ctx, name, v, *p.assign)
	case p.prefer != nil || p.clear || p.setStrategy:
		return c.amend(ctx, v, p)
	}
	return nil
}

// sendPing sets the candidate's pingTime. A failed ping is logged and sent
// again when the Lease is looked at next (at the latest after AckTimeout).
func (c *Coordinator) sendPing(ctx context.Context, cand Candidate, now time.Time) {
	lc, ok := c.roster.Get(cand.Name)
	if !ok {
		return
	}
	lc.Spec.PingTime = &metav1.MicroTime{Time: now}
	if _, err := c.client.CoordinationV1beta1().LeaseCandidates(c.cfg.Namespace).Update(ctx, lc, metav1.UpdateOptions{}); err != nil {
		c.log.Info("pinging a lease candidate failed; trying again after the ack timeout", zap.String("candidate", cand.Name), zap.Error(err))
		return
	}
	c.pinged[cand.Name] = now
}

// prunePings forgets own pings long past any use.
func (c *Coordinator) prunePings(now time.Time) {
	for name, at := range c.pinged {
		if now.Sub(at) > time.Hour {
			delete(c.pinged, name)
		}
	}
}

// assign writes cand as the holder of a vacant Lease, creating it if absent.
func (c *Coordinator) assign(ctx context.Context, name string, v view, cand Candidate) error {
	leases := c.client.CoordinationV1().Leases(c.cfg.Namespace)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.cfg.Namespace}}
	transitions := int32(0)
	if v.lease != nil {
		l = v.lease.DeepCopy()
		transitions = ptr.Deref(l.Spec.LeaseTransitions, 0) + 1
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	if cand.Key != "" {
		l.Annotations[resourcelock.LeaseHolderKeyAnnotation] = cand.Key
	} else {
		delete(l.Annotations, resourcelock.LeaseHolderKeyAnnotation)
	}
	delete(l.Annotations, PreferredHolderKeyAnnotation)
	now := metav1.NewMicroTime(v.now)
	l.Spec.HolderIdentity = ptr.To(cand.Name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(cand.LeaseDuration / time.Second))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, ptr.To(now)
	l.Spec.LeaseTransitions = ptr.To(transitions)
	l.Spec.Strategy = ptr.To(Strategy)
	l.Spec.PreferredHolder = nil
	var err error
	if v.lease == nil {
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
	} else {
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("assign lease %s to %s: %w", name, cand.Name, err)
	}
	c.decided(name, DecisionAssign, v.defaultRevision, zap.String("holder", cand.Name), zap.String("key", cand.Key),
		zap.String("identity", cand.Identity), zap.Int32("transitions", transitions))
	return nil
}

// amend updates spec.preferredHolder and spec.strategy of a held Lease.
func (c *Coordinator) amend(ctx context.Context, v view, p plan) error {
	l := v.lease.DeepCopy()
	var kinds []Decision
	if p.setStrategy {
		l.Spec.Strategy = ptr.To(Strategy)
		kinds = append(kinds, DecisionStrategy)
	}
	fields := []zap.Field{zap.String("holder", ptr.Deref(l.Spec.HolderIdentity, ""))}
	switch {
	case p.prefer != nil:
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Spec.PreferredHolder = ptr.To(p.prefer.Name)
		l.Annotations[PreferredHolderKeyAnnotation] = p.prefer.Key
		kinds = append(kinds, DecisionPrefer)
		fields = append(fields, zap.String("preferred", p.prefer.Name), zap.String("key", p.prefer.Key))
	case p.clear:
		fields = append(fields, zap.String("was", ptr.Deref(l.Spec.PreferredHolder, "")))
		l.Spec.PreferredHolder = nil
		delete(l.Annotations, PreferredHolderKeyAnnotation)
		kinds = append(kinds, DecisionClear)
	}
	if _, err := c.client.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update lease %s: %w", l.Name, err)
	}
	for _, k := range kinds {
		c.decided(l.Name, k, v.defaultRevision, fields...)
	}
	return nil
}

// decided logs and counts one decision written to the API server.
func (c *Coordinator) decided(lease string, d Decision, defaultRevision string, fields ...zap.Field) {
	c.cfg.Metrics(lease, d)
	c.log.Info("coordinated lease", append([]zap.Field{zap.String("lease", lease), zap.String("decision", string(d)),
		zap.String("default", defaultRevision)}, fields...)...)
}
