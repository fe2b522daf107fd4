// Package lockstatus reads every leader election lock in a namespace straight
// from the API server: ConfigMaps carrying the leader annotation and Leases.
// It understands locks written by meshd, istiod and client-go alike.
package lockstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/election/lockread"
	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Lock is one election lock as stored.
type Lock struct {
	// Election is the election the lock serves: the object name.
	Election  string            `json:"election"`
	Kind      election.LockKind `json:"lock"`
	Namespace string            `json:"namespace"`
	Holder    string            `json:"holder"`
	HolderKey string            `json:"holderKey"`
	// Revision and Remote are parsed from HolderKey.
	Revision      string        `json:"revision"`
	Remote        bool          `json:"remote"`
	AcquireTime   time.Time     `json:"acquireTime"`
	RenewTime     time.Time     `json:"renewTime"`
	LeaseDuration time.Duration `json:"leaseDuration"`
	Transitions   int           `json:"transitions"`
	// Error is set when the record cannot be decoded.
	Error string `json:"error,omitempty"`
	// Strategy is a Lease's spec.strategy: set on a coordinated election.
	Strategy string `json:"strategy,omitempty"`
	// PreferredHolder is a Lease's spec.preferredHolder, the candidate a
	// coordinator wants the holder to hand the lock to, and
	// PreferredHolderKey that candidate's holder key.
	PreferredHolder    string `json:"preferredHolder,omitempty"`
	PreferredHolderKey string `json:"preferredHolderKey,omitempty"`
	// Candidates are a Lease's LeaseCandidates, ranked; see
	// ListCandidates and Attach.
	Candidates []Candidate `json:"candidates,omitempty"`

	mark map[string]string // the object's annotations, until fillSession
	// Session names the session Lease that renews the holder's record
	// (election.WithSessions), when the record's mark names a session that
	// is still there under the same token; SessionRenewTime is that
	// Lease's renew time and SessionLeaseDuration its lease.
	Session              string        `json:"session,omitempty"`
	SessionRenewTime     time.Time     `json:"sessionRenewTime,omitzero"`
	SessionLeaseDuration time.Duration `json:"sessionLeaseDuration,omitempty"`
}

// Held reports whether the record names a holder.
func (l Lock) Held() bool { return l.Holder != "" }

// ExpiresIn is how long until the lease runs out by the record's own renew
// time, as seen by a clock at now. Electors judge expiry by their own
// observation time instead, so this is an estimate that assumes the holder's
// and the reader's clocks agree.
func (l Lock) ExpiresIn(now time.Time) time.Duration {
	left := l.RenewTime.Add(l.LeaseDuration).Sub(now)
	if l.Session != "" {
		left = max(left, l.SessionRenewTime.Add(l.SessionLeaseDuration).Sub(now))
	}
	return left
}

// List returns the locks in namespace sorted by kind and name.
func List(ctx context.Context, client kubernetes.Interface, namespace string) ([]Lock, error) {
	var locks []Lock
	cms, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ConfigMaps in %s: %w", namespace, err)
	}
	for i := range cms.Items {
		rec, err := lockread.Object(&cms.Items[i])
		if rec == nil && err == nil {
			continue // not a lock
		}
		l := Lock{Election: cms.Items[i].Name, Kind: election.ConfigMapLock, Namespace: namespace}
		if err != nil {
			l.Error = err.Error()
		} else {
			l.fill(rec)
		}
		l.mark = cms.Items[i].Annotations
		locks = append(locks, l)
	}
	leases, err := client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Leases in %s: %w", namespace, err)
	}
	sessions := map[string]*coordinationv1.Lease{}
	for i := range leases.Items {
		if leases.Items[i].Labels[session.Label] == "true" {
			sessions[leases.Items[i].Name] = &leases.Items[i] // a heartbeat, not an election
			continue
		}
		l := Lock{Election: leases.Items[i].Name, Kind: election.LeaseLock, Namespace: namespace}
		l.fill(resourcelock.LeaseToRecord(&leases.Items[i]))
		l.fillCoordination(&leases.Items[i])
		l.mark = leases.Items[i].Annotations
		locks = append(locks, l)
	}
	for i := range locks {
		locks[i].fillSession(sessions)
	}
	sort.Slice(locks, func(i, j int) bool {
		if locks[i].Kind != locks[j].Kind {
			return locks[i].Kind < locks[j].Kind
		}
		return locks[i].Election < locks[j].Election
	})
	return locks, nil
}

func (l *Lock) fill(rec *resourcelock.Record) {
	l.Holder = rec.HolderIdentity
	l.HolderKey = rec.HolderKey
	c := priority.ParseKey(rec.HolderKey)
	l.Revision, l.Remote = c.Revision, c.Remote
	l.AcquireTime = rec.AcquireTime.Time
	l.RenewTime = rec.RenewTime.Time
	l.LeaseDuration = time.Duration(rec.LeaseDurationSeconds) * time.Second
	l.Transitions = rec.LeaderTransitions
}

// fillSession names the session that renews the holder's record, if its
// mark names one that is still there under the same token.
func (l *Lock) fillSession(sessions map[string]*coordinationv1.Lease) {
	raw, ok := l.mark[lockmeta.SessionAnnotationKey]
	l.mark = nil
	if !ok || l.Holder == "" {
		return
	}
	var m lockmeta.SessionMark
	if json.Unmarshal([]byte(raw), &m) != nil || m.Holder != l.Holder {
		return
	}
	name, token, ok := session.ParseRef(m.Session)
	s := sessions[name]
	if !ok || s == nil || s.Annotations[session.TokenAnnotation] != token || s.Spec.HolderIdentity == nil || *s.Spec.HolderIdentity == "" {
		return
	}
	l.Session = name
	if s.Spec.RenewTime != nil {
		l.SessionRenewTime = s.Spec.RenewTime.Time
	}
	if s.Spec.LeaseDurationSeconds != nil {
		l.SessionLeaseDuration = time.Duration(*s.Spec.LeaseDurationSeconds) * time.Second
	}
}

// fillCoordination copies what a coordinator wrote into lease.
func (l *Lock) fillCoordination(lease *coordinationv1.Lease) {
	if s := lease.Spec.Strategy; s != nil {
		l.Strategy = string(*s)
	}
	if p := lease.Spec.PreferredHolder; p != nil {
		l.PreferredHolder = *p
		l.PreferredHolderKey = lease.Annotations[lockmeta.LeasePreferredHolderKeyAnnotation]
	}
}

// Attach gives every Lease lock of locks its candidates from c. Candidates
// of a Lease that does not exist yet are not shown.
func Attach(locks []Lock, c Candidates) {
	for i := range locks {
		if locks[i].Kind == election.LeaseLock {
			locks[i].Candidates = c.ByLease[locks[i].Election]
		}
	}
}
