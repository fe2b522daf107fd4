package election

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"
	"k8s.io/apimachinery/pkg/util/validation"
)

// LockKind names the kind of object an election's record lives in. It is
// the only spelling of a lock kind in this package's API.
type LockKind string

// Lock kinds.
const (
	// ConfigMapLock keeps the record in an annotation of a ConfigMap, as
	// istiod does for its prioritized elections.
	ConfigMapLock LockKind = "ConfigMap"
	// LeaseLock keeps the record in a coordination.k8s.io/v1 Lease.
	LeaseLock LockKind = "Lease"
)

// Spec declares one candidacy in one election: which lock, who competes for
// it and under which rule. The zero value of each optional field has the
// meaning given on it; New validates the whole Spec and reports every
// problem at once.
type Spec struct {
	// Namespace holds the lock object. Required; a DNS label.
	Namespace string
	// ElectionID names the election. The lock object is named ElectionID,
	// or ElectionID-Revision for a per-revision election; that name must be
	// a valid object name. Required. The IDs istiod uses are exported as
	// constants (IngressController, NamespaceController, ...).
	ElectionID string
	// Identity is the holder identity this candidate writes. Empty means
	// the Identity of the election's Shared: the host name with a random
	// suffix, one for all the elections of a Group.
	Identity string
	// Revision is the control-plane revision of this instance; empty means
	// DefaultRevision. It must be a DNS label.
	Revision string
	// Remote marks an instance that serves a remote cluster. Its holder key
	// is "^"+Revision, and a local instance of the same revision
	// takes the lock from it. Prioritized elections only.
	Remote bool
	// Lock is the kind of lock object. Empty means ConfigMapLock for a
	// prioritized election (what istiod uses; WithDefaultLock changes it)
	// and LeaseLock for a per-revision one, which accepts only LeaseLock.
	Lock LockKind
	// PerRevision elects one leader per revision, on a Lease named
	// ElectionID-Revision that is never taken from its holder. When false
	// the election is prioritized: one leader for the mesh, chosen by the
	// steal rule (see the package documentation) unless WithPrioritized(false).
	PerRevision bool
	// Mode is how the candidates agree on a leader; empty means Racing.
	// Every candidate of one election must use the same mode. Coordinated
	// modes need a Lease lock, which is also their default.
	Mode Mode
}

// withDefaults returns s with its empty optional fields filled in;
// defaultLock is the lock kind of a prioritized election that names none,
// and identity gives the identity of one that names none.
func (s Spec) withDefaults(defaultLock LockKind, identity func() string) Spec {
	if s.Identity == "" {
		s.Identity = identity()
	}
	if s.Revision == "" {
		s.Revision = DefaultRevision
	}
	if s.Mode == "" {
		s.Mode = Racing
	}
	if s.Lock == "" {
		s.Lock = defaultLock
		if s.PerRevision || s.Mode.coordinatedMode() {
			s.Lock = LeaseLock
		}
	}
	return s
}

// lockName is the name of the lock object of a defaulted Spec.
func (s Spec) lockName() string {
	if s.PerRevision {
		return s.ElectionID + "-" + s.Revision
	}
	return s.ElectionID
}

// validate reports every problem of a defaulted Spec.
func (s Spec) validate() error {
	var errs *multierror.Error
	add := func(err error) { errs = multierror.Append(errs, err) }
	if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
		add(fmt.Errorf("invalid namespace %q: %s", s.Namespace, strings.Join(msgs, "; ")))
	}
	if s.ElectionID == "" {
		add(errors.New("election ID must not be empty"))
	} else if msgs := validation.IsDNS1123Subdomain(s.lockName()); len(msgs) > 0 {
		add(fmt.Errorf("invalid lock name %q: %s", s.lockName(), strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(s.Revision); len(msgs) > 0 {
		add(fmt.Errorf("invalid revision %q: %s", s.Revision, strings.Join(msgs, "; ")))
	}
	if s.Lock != ConfigMapLock && s.Lock != LeaseLock {
		add(fmt.Errorf("unknown lock kind %q: want %s or %s", s.Lock, ConfigMapLock, LeaseLock))
	}
	if s.PerRevision && s.Lock == ConfigMapLock {
		add(errors.New("a per-revision election needs a Lease lock"))
	}
	if _, err := ParseMode(string(s.Mode)); err != nil {
		add(err)
	} else if s.Mode.coordinatedMode() && s.Lock == ConfigMapLock {
		add(fmt.Errorf("a %s election needs a Lease lock", s.Mode))
	}
	if s.PerRevision && s.Remote {
		add(errors.New("Remote applies only to prioritized elections, not per-revision ones"))
	}
	return errs.ErrorOrNil()
}
