package podexit

import (
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Judge is the follower's side: it implements protocol.HolderExit from the
// holder's Pod mark on the lock and a shared watch of the Pod it names. It
// follows one Pod at a time, the observed holder's, from the first time
// the elector asks about it until it asks about another holder or Close.
// It holds no reference to the elector: SetWake gives it the function that
// makes the elector try at once, which it calls when a version of the Pod
// proves the holder gone.
type Judge struct {
	client  kubernetes.Interface
	watches *Watches
	marks   lockcap.HolderPodReader
	log     *zap.Logger

	mu        sync.Mutex
	wake      func()
	closed    bool
	sub       *Subscription
	following string             // namespace/name of the Pod sub follows
	mark      lockmeta.HolderPod // the mark last asked about
	reported  string             // the last judgement logged
}

// NewJudge returns a judge that reads holders' marks from marks (the
// election's lock) and follows their Pods through watches.
func NewJudge(client kubernetes.Interface, watches *Watches, marks lockcap.HolderPodReader, logger *zap.Logger) *Judge {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Judge{client: client, watches: watches, marks: marks, log: logger}
}

// SetWake sets the function called, from a watch goroutine, when a
// version of the followed Pod proves the holder gone; it must not block.
func (j *Judge) SetWake(wake func()) {
	j.mu.Lock()
	j.wake = wake
	j.mu.Unlock()
}

// Exited implements protocol.HolderExit: whether the lock's latest mark
// names rec's holder and the latest version of its Pod proves that the
// process that published the mark has exited.
func (j *Judge) Exited(rec resourcelock.Record) bool {
	mark, ok := j.marks.HolderPod()
	if !ok || mark.Holder != rec.HolderIdentity || rec.HolderIdentity == "" {
		j.follow(nil)
		return false
	}
	sub := j.follow(&mark)
	if sub == nil {
		return false
	}
	proven, why := Proves(sub.Pod(), mark)
	j.report(rec.HolderIdentity, proven, why)
	return proven
}

// follow makes the judge follow the Pod mark names (none for nil) and
// returns the subscription; nil once closed.
func (j *Judge) follow(mark *lockmeta.HolderPod) *Subscription {
	j.mu.Lock()
	key := ""
	if mark != nil && !j.closed {
		key = mark.Namespace + "/" + mark.Pod
		j.mark = *mark
	}
	if key == j.following {
		sub := j.sub
		j.mu.Unlock()
		return sub
	}
	old := j.sub
	j.sub, j.following = nil, key
	if key != "" {
		j.sub = j.watches.Subscribe(j.client, mark.Namespace, mark.Pod, j.delivered)
	}
	sub := j.sub
	j.mu.Unlock()
	if old != nil {
		// Outside mu: closing waits for the watch, whose delivery takes mu.
		old.Close()
	}
	return sub
}

// delivered wakes the elector when a new version of the followed Pod
// proves the holder of the mark last asked about gone.
func (j *Judge) delivered(pod *corev1.Pod) {
	j.mu.Lock()
	mark, wake := j.mark, j.wake
	j.mu.Unlock()
	if proven, _ := Proves(pod, mark); proven && wake != nil {
		wake()
	}
}

func (j *Judge) report(holder string, proven bool, why string) {
	j.mu.Lock()
	same := why == j.reported
	j.reported = why
	j.mu.Unlock()
	if same {
		return
	}
	if proven {
		j.log.Info("the holder's process has exited, by its Pod's status; its lease no longer binds",
			zap.String("holder", holder), zap.String("proof", why))
		return
	}
	j.log.Debug("no proof that the holder's process has exited; waiting for its lease",
		zap.String("holder", holder), zap.String("reason", why))
}

// Close stops following; Exited answers false from then on.
func (j *Judge) Close() {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.follow(nil)
}
