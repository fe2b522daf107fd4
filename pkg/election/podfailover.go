package election

import (
	"errors"
	"fmt"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/election/podexit"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// PodIdentity is what a process knows about the Pod it runs in, typically
// from the downward API: the Pod's Namespace, name (Pod) and UID and the
// name of its own Container, plus ProcessStart, a reading of its own clock
// taken while it runs (the earlier the better, ideally first thing in
// main). Its Validate method reports every missing or invalid field.
type PodIdentity = podexit.Identity

// WithPodIdentity says which Pod and container this process runs in: while
// it holds a lock, it publishes that Pod, container and run of the
// container next to its record (the annotation leader.meshd.io/holder-pod),
// once its own Pod's status shows this run, so that followers with WithPodFailover take over as soon as
// the kubelet reports the run ended instead of waiting for the lease
// (docs/handover.md, "Pod-aware failover"). Set id.ProcessStart to a clock
// reading taken first thing in main; zero means when the election is
// built, which may be too late for the holder to recognise its run (it
// then publishes nothing and followers wait for its lease). It needs get,
// list and watch on Pods in id.Namespace. The zero PodIdentity turns
// publishing off (for elections whose locks live in another cluster than
// the process's Pod); an incomplete or invalid id is refused.
func WithPodIdentity(id PodIdentity) Option {
	return func(o *options) {
		o.mark("WithPodIdentity")
		if id == (PodIdentity{}) {
			o.pod = nil
			return
		}
		o.pod = &id
	}
}

// WithPodFailover makes a follower watch the Pod a holder publishes (with
// WithPodIdentity) and take the lock as soon as the kubelet's reports
// prove that the holder's process has exited: its container's run
// terminated or restarted. Nothing else shortens a lease: a deleted Pod, a
// node that is NotReady, an eviction, a missing Pod or a broken watch all
// wait for the lease, as without the option. One watch per holder Pod is
// shared by the elections of one Shared. It needs get, list and watch on
// Pods in the holders' namespace. Off by default.
func WithPodFailover(enabled bool) Option {
	return func(o *options) { o.podFailover = enabled; o.mark("WithPodFailover") }
}

// validatePod reports what is wrong with the Pod-aware options.
func (o *options) validatePod() error {
	var errs []error
	if o.pod != nil {
		if err := o.pod.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("WithPodIdentity: %w", err))
		}
	}
	if o.podFailover && !o.watch {
		errs = append(errs, errors.New("WithPodFailover needs the watch: a follower learns of the holder's exit only through watches"))
	}
	return errlist.Join(errs...)
}

// podAware is an election's part in Pod-aware failover: the publisher of
// its holder's Pod mark and the judge of other holders' marks, either of
// which may be nil.
type podAware struct {
	publisher *podexit.Publisher
	judge     *podexit.Judge
	wake      func() // makes the elector act at once
}

// newPodAware makes the publisher of an election with a Pod identity.
func newPodAware(client kubernetes.Interface, o *options, log *zap.Logger) (*podAware, error) {
	p := &podAware{}
	if o.pod == nil {
		return p, nil
	}
	var err error
	if p.publisher, err = podexit.NewPublisher(client, o.shared.pods, *o.pod, log); err != nil {
		return nil, err
	}
	return p, nil
}

// source is the lock's supplier of this holder's Pod mark; nil without a
// Pod identity, which leaves the annotation to others. It supplies the
// mark only while working reports that the term's work runs: a follower
// that sees the mark may take over at once on proof that this process has
// exited, which is sound only once nothing but this process's own work is
// left to protect. A holder that took the lock by force waits, before its
// work starts, for the work of the holder before it to stop; were its
// mark out during that fence, a proof of its exit would end its lease and
// with it the only wait that protects that work (the simulation's classic
// seed 774: the thief crashed before its fence, and its restarted process
// took the lock on the kubelet's report beside the older work). So the
// mark goes out with the first write after the work started, and a
// holder whose work has not started is waited for by its lease.
func (p *podAware) source(working func() bool) lockmeta.HolderPodSource {
	if p == nil || p.publisher == nil {
		return nil
	}
	return func() (lockmeta.HolderPod, bool) {
		if !working() {
			return lockmeta.HolderPod{}, false
		}
		return p.publisher.Mark()
	}
}

// follow makes the judge of a follower with WithPodFailover, reading
// marks from lock.
func (p *podAware) follow(client kubernetes.Interface, o *options, lock resourcelock.Interface, log *zap.Logger) {
	if p == nil || !o.podFailover {
		return
	}
	if marks, ok := lock.(lockcap.HolderPodReader); ok {
		p.judge = podexit.NewJudge(client, o.shared.pods, marks, log)
	}
}

// hook is the elector's HolderExit; nil without a judge.
func (p *podAware) hook() protocol.HolderExit {
	if p == nil || p.judge == nil {
		return nil
	}
	return p.judge
}

// setWake makes a proof wake the elector, and a change of the holder's
// own mark too: a leader then writes its record with the mark at once.
func (p *podAware) setWake(wake func()) {
	if p == nil {
		return
	}
	p.wake = wake
	if p.judge != nil {
		p.judge.SetWake(wake)
	}
}

// start runs the publisher; the function it returns stops the publisher
// and the judge's watch, and waits for both.
func (p *podAware) start() (stop func()) {
	if p == nil {
		return func() {}
	}
	stopPublisher := func() {}
	if p.publisher != nil {
		stopPublisher = p.publisher.Start(p.wake)
	}
	return func() {
		stopPublisher()
		if p.judge != nil {
			p.judge.Close()
		}
	}
}
