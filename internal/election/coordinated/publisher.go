package coordinated

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1beta1"
	"k8s.io/utils/clock"
)

// Publisher timings.
const (
	// retryMin is the first back-off after a failed write; it doubles up to
	// the heartbeat.
	retryMin = 250 * time.Millisecond
	// DeleteTimeout bounds the delete of the candidate when Run ends.
	DeleteTimeout = 5 * time.Second
)

// Publisher maintains one LeaseCandidate: it creates it (or adopts one of
// the same name, fixing its fields and keeping foreign labels, annotations
// and owner references), renews spec.renewTime every heartbeat, answers a
// ping (spec.pingTime later than spec.renewTime) at once, re-creates the
// candidate as soon as it sees it deleted, and deletes it when Run ends.
//
// A renewal updates the last object this Publisher wrote, with optimistic
// concurrency and no read first. After a conflict it retries once from the
// Roster's copy and, if that is no newer, from a GET. Failures back off from
// 250ms, doubling up to the heartbeat.
//
// When answering a ping the new renewTime is at least the ping's time, so
// that a pinger whose clock runs ahead of this node still sees its ping
// answered.
type Publisher struct {
	client  coordclient.LeaseCandidateInterface
	roster  *Roster
	spec    CandidateSpec
	log     *zap.Logger
	clock   clock.Clock
	ping    chan struct{}
	running atomic.Bool

	last *coordinationv1beta1.LeaseCandidate // owned by Run
}

// NewPublisher validates spec (see CandidateSpec for the defaults) and
// returns a Publisher that has not started. roster must be the Roster of
// spec.Namespace for client; log and clk may be nil (no logs, real clock).
func NewPublisher(client kubernetes.Interface, roster *Roster, spec CandidateSpec, log *zap.Logger, clk clock.Clock) (*Publisher, error) {
	if client == nil || roster == nil {
		return nil, errors.New("coordinated: NewPublisher needs a client and a roster")
	}
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	if roster.key.namespace != spec.Namespace {
		return nil, fmt.Errorf("coordinated: roster of namespace %q cannot serve a candidate in %q", roster.key.namespace, spec.Namespace)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Publisher{
		client: client.CoordinationV1beta1().LeaseCandidates(spec.Namespace),
		roster: roster,
		spec:   spec,
		log:    log.With(zap.String("leaseCandidate", spec.Namespace+"/"+spec.Name)),
		clock:  clk,
		ping:   make(chan struct{}, 1),
	}, nil
}

// Spec returns the validated spec, defaults filled in.
func (p *Publisher) Spec() CandidateSpec { return p.spec }

// Run publishes the candidate until ctx ends, then deletes it (bounded by
// DeleteTimeout) and returns the delete's error, if any. Write errors
// before that are logged and retried, never returned. Run may be called
// once.
func (p *Publisher) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("coordinated: Publisher.Run called twice")
	}
	unsubscribe := p.roster.Subscribe(p.spec.Name, p.onChange)
	defer unsubscribe()
	failures := 0
	for {
		delay := p.spec.Heartbeat
		if err := p.publish(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			delay = backoff(failures, p.spec.Heartbeat)
			p.log.Warn("publishing the lease candidate failed", zap.Error(err), zap.Duration("retryIn", delay))
		} else {
			failures = 0
		}
		if !p.wait(ctx, delay) {
			break
		}
	}
	return p.remove()
}

// wait returns false when ctx ends, and true once delay has passed or the
// Roster shows something to answer at once (see urgent). Wake-ups with
// nothing to answer are ignored.
func (p *Publisher) wait(ctx context.Context, delay time.Duration) bool {
	t := p.clock.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case <-p.ping:
			if p.urgent() {
				return true
			}
		}
	}
}

// urgent reports whether the cached candidate is missing or carries a ping
// this Publisher has not answered yet.
func (p *Publisher) urgent() bool {
	cached, ok := p.roster.Get(p.spec.Name)
	if !ok {
		return true
	}
	return unansweredPing(cached) && (p.last == nil || !samePing(cached, p.last))
}

func backoff(failures int, limit time.Duration) time.Duration {
	d := retryMin
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// onChange runs on the Roster's event goroutine: a ping, or the deletion
// of the candidate, wakes Run, which then checks the cache (urgent).
func (p *Publisher) onChange(lc *coordinationv1beta1.LeaseCandidate) {
	if lc == nil || unansweredPing(lc) {
		select {
		case p.ping <- struct{}{}:
		default:
		}
	}
}

func unansweredPing(lc *coordinationv1beta1.LeaseCandidate) bool {
	return lc.Spec.PingTime != nil && (lc.Spec.RenewTime == nil || lc.Spec.RenewTime.Before(lc.Spec.PingTime))
}

func samePing(a, b *coordinationv1beta1.LeaseCandidate) bool {
	if a.Spec.PingTime == nil || b.Spec.PingTime == nil {
		return a.Spec.PingTime == b.Spec.PingTime
	}
	return a.Spec.PingTime.Equal(b.Spec.PingTime)
}

// publish makes one create or renewal, with one retry after a conflict.
func (p *Publisher) publish(ctx context.Context) error {
	base := p.last
	if cached, ok := p.roster.Get(p.spec.Name); ok && unansweredPing(cached) && (base == nil || !samePing(cached, base)) {
		base = cached // it carries a ping we have not seen, so it is newer than what we wrote
	}
	if base == nil {
		return p.create(ctx)
	}
	err := p.renew(ctx, base)
	switch {
	case apierrors.IsNotFound(err):
		p.log.Info("the lease candidate was deleted; creating it again")
		p.last = nil
		return p.create(ctx)
	case apierrors.IsConflict(err):
		if base, err = p.fresher(ctx, base); err != nil {
			return err
		}
		return p.renew(ctx, base)
	}
	return err
}

// fresher returns a newer copy than base: the Roster's, else a GET.
func (p *Publisher) fresher(ctx context.Context, base *coordinationv1beta1.LeaseCandidate) (*coordinationv1beta1.LeaseCandidate, error) {
	if cached, ok := p.roster.Get(p.spec.Name); ok && cached.ResourceVersion != base.ResourceVersion {
		return cached, nil
	}
	got, err := p.client.Get(ctx, p.spec.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read lease candidate after a conflict: %w", err)
	}
	return got, nil
}

func (p *Publisher) create(ctx context.Context) error {
	obj := p.apply(&coordinationv1beta1.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{
		Name: p.spec.Name, Namespace: p.spec.Namespace,
	}}, nil)
	created, err := p.client.Create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		p.last = created
		p.log.Info("lease candidate created")
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create lease candidate: %w", err)
	}
	existing, err := p.fresher(ctx, &coordinationv1beta1.LeaseCandidate{})
	if err != nil {
		return err
	}
	if existing.Spec.LeaseName != p.spec.LeaseName {
		return p.replace(ctx, existing)
	}
	p.log.Info("adopting an existing lease candidate")
	return p.renew(ctx, existing)
}

// replace deletes a candidate of the same name whose immutable lease name
// differs; the next attempt creates ours.
func (p *Publisher) replace(ctx context.Context, existing *coordinationv1beta1.LeaseCandidate) error {
	err := p.client.Delete(ctx, existing.Name, deleteOptions(existing))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replace lease candidate for lease %q: %w", existing.Spec.LeaseName, err)
	}
	return fmt.Errorf("lease candidate existed for lease %q; deleted it", existing.Spec.LeaseName)
}

// renew writes base with our fields and a new renewTime.
func (p *Publisher) renew(ctx context.Context, base *coordinationv1beta1.LeaseCandidate) error {
	updated, err := p.client.Update(ctx, p.apply(base.DeepCopy(), base.Spec.PingTime), metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renew lease candidate: %w", err)
	}
	p.last = updated
	return nil
}

// apply sets our fields on obj, keeping everything else, and renewTime to
// now, or to ping when that is later.
func (p *Publisher) apply(obj *coordinationv1beta1.LeaseCandidate, ping *metav1.MicroTime) *coordinationv1beta1.LeaseCandidate {
	s := p.spec
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[IdentityAnnotation] = s.Identity
	obj.Annotations[HolderKeyAnnotation] = s.Key
	obj.Annotations[PreemptsAnnotation] = strconv.FormatBool(s.Preempts)
	obj.Annotations[LeaseDurationAnnotation] = strconv.Itoa(int(s.LeaseDuration / time.Second))
	obj.Annotations[HeartbeatAnnotation] = strconv.Itoa(int(s.Heartbeat / time.Second))
	if s.Owner != nil && !hasOwner(obj.OwnerReferences, s.Owner) {
		obj.OwnerReferences = append(obj.OwnerReferences, *s.Owner)
	}
	obj.Spec.LeaseName = s.LeaseName
	obj.Spec.Strategy = s.Strategy
	obj.Spec.BinaryVersion = s.BinaryVersion
	obj.Spec.EmulationVersion = s.EmulationVersion
	now := p.clock.Now()
	if ping != nil && ping.After(now) {
		now = ping.Time
	}
	obj.Spec.RenewTime = &metav1.MicroTime{Time: now}
	return obj
}

func hasOwner(refs []metav1.OwnerReference, o *metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.UID == o.UID {
			return true
		}
	}
	return false
}

// remove deletes the candidate we wrote last, if it is still ours.
func (p *Publisher) remove() error {
	if p.last == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), DeleteTimeout)
	defer cancel()
	err := p.client.Delete(ctx, p.spec.Name, deleteOptions(p.last))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("coordinated: delete lease candidate %s/%s: %w", p.spec.Namespace, p.spec.Name, err)
	}
	p.log.Info("lease candidate deleted")
	return nil
}

// deleteOptions deletes obj only if the object of its name is still obj
// (same UID), when the UID is known.
func deleteOptions(obj *coordinationv1beta1.LeaseCandidate) metav1.DeleteOptions {
	if obj.UID == "" {
		return metav1.DeleteOptions{}
	}
	uid := obj.UID
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}
