package podexit

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// Publisher is the holder's side: it reads its own Pod through a shared
// watch and supplies, as the lockmeta.HolderPodSource of the holder's
// lock, the mark that lets followers watch that Pod. It has a mark only
// once its Pod's status has shown this process's run (OwnRun); the mark is
// carried by every write of the holder's record from then on, and a
// holder writes its record at once when the mark changes (see Start).
type Publisher struct {
	client  kubernetes.Interface
	watches *Watches
	id      Identity
	log     *zap.Logger

	mu      sync.Mutex
	mark    lockmeta.HolderPod
	have    bool
	doubt   bool   // a later status contradicted the mark: publish nothing again
	waiting string // why there is no mark yet, last logged
}

// NewPublisher validates id and returns a publisher that reads the Pod of
// id through watches. A zero id.ProcessStart is taken as now.
func NewPublisher(client kubernetes.Interface, watches *Watches, id Identity, logger *zap.Logger) (*Publisher, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if client == nil || watches == nil {
		return nil, fmt.Errorf("%w: a client and Watches are required", ErrInvalidIdentity)
	}
	if id.ProcessStart.IsZero() {
		id.ProcessStart = time.Now()
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Publisher{client: client, watches: watches, id: id,
		log: logger.With(zap.String("pod", id.Key()), zap.String("container", id.Container))}, nil
}

// Mark implements lockmeta.HolderPodSource.
func (p *Publisher) Mark() (lockmeta.HolderPod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mark, p.have && !p.doubt
}

// Start follows the holder's own Pod until the returned function is
// called; that function returns once the watch is no longer used by it.
// changed, if not nil, is called (from the watch's goroutine; it must not
// block) when the mark changes, so that a holder writes it at once rather
// than with its next renew, which with sessions may never come.
func (p *Publisher) Start(changed func()) (stop func()) {
	see := func(pod *corev1.Pod) {
		if p.see(pod) && changed != nil {
			changed()
		}
	}
	sub := p.watches.Subscribe(p.client, p.id.Namespace, p.id.Pod, see)
	if pod := sub.Pod(); pod != nil {
		see(pod)
	}
	return sub.Close
}

// see judges a version of the holder's own Pod; it reports whether the
// mark changed (found, or withdrawn).
func (p *Publisher) see(pod *corev1.Pod) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.doubt {
		return false
	}
	if p.have {
		// The kubelet never reports a later run of this container while
		// this process lives: if it does, the run published was not this
		// process's (or the clock jumped). Withdraw the mark for good.
		if pod != nil && string(pod.UID) == p.id.UID {
			if cs := containerStatus(pod, p.id.Container); cs != nil && cs.RestartCount > p.mark.RestartCount {
				p.doubt = true
				p.log.Error("own Pod reports a later run of this container than the one published; publishing no Pod mark from now on",
					zap.Int32("published", p.mark.RestartCount), zap.Int32("reported", cs.RestartCount))
				return true
			}
		}
		return false
	}
	mark, ok, why := OwnRun(pod, p.id)
	if !ok {
		if why != p.waiting {
			p.waiting = why
			p.log.Info("not publishing a Pod mark yet; followers wait for the lease", zap.String("reason", why))
		}
		return false
	}
	p.mark, p.have = mark, true
	p.log.Info("publishing the Pod mark with the holder's records", zap.Int32("restartCount", mark.RestartCount),
		zap.Time("startedAt", mark.StartedAt.Time))
	return true
}
