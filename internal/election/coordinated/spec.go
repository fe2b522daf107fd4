package coordinated

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/meshd-io/meshd/internal/errlist"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"
)

// FallbackBinaryVersion is the binary version announced when none is given
// and the binary carries no semantic module version.
const FallbackBinaryVersion = "1.0.0"

// CandidateSpec describes the LeaseCandidate a Publisher maintains.
type CandidateSpec struct {
	// Namespace of the Lease and the candidate. Required.
	Namespace string
	// LeaseName is the Lease the candidate runs for. Required.
	LeaseName string
	// Name of the LeaseCandidate; CandidateName(LeaseName, Identity) when
	// empty. It is the identity the Lease names when this candidate holds it.
	Name string
	// Identity is the candidate's meshd identity. Required.
	Identity string
	// Key is the candidate's holder key (revision, "^"+revision if remote).
	Key string
	// Preempts is true for a prioritized election and false for a
	// per-revision one.
	Preempts bool
	// Strategy defaults to Strategy.
	Strategy coordinationv1.CoordinatedLeaseStrategy
	// BinaryVersion is a semantic version without a leading "v"; empty
	// means DefaultBinaryVersion().
	BinaryVersion string
	// EmulationVersion defaults to BinaryVersion and may not exceed it.
	EmulationVersion string
	// LeaseDuration is the election's lease, at least one second; it is
	// announced in whole seconds (rounded down).
	LeaseDuration time.Duration
	// Heartbeat is the renew interval, at least one second; zero means
	// 2 x LeaseDuration.
	Heartbeat time.Duration
	// Owner, when set (normally the Pod), becomes the candidate's owner
	// reference so that a garbage collector removes a candidate whose owner
	// is gone.
	Owner *metav1.OwnerReference
}

// DefaultBinaryVersion is the module version of the running binary when it
// is a semantic version ("v1.2.3" becomes "1.2.3"), else
// FallbackBinaryVersion.
func DefaultBinaryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return FallbackBinaryVersion
	}
	v := strings.TrimSuffix(strings.TrimPrefix(info.Main.Version, "v"), "+incompatible")
	if _, err := version.ParseSemantic(v); err != nil {
		return FallbackBinaryVersion
	}
	return v
}

// withDefaults returns s with every default filled in and validated.
func (s CandidateSpec) withDefaults() (CandidateSpec, error) {
	if s.Name == "" {
		s.Name = CandidateName(s.LeaseName, s.Identity)
	}
	if s.Strategy == "" {
		s.Strategy = Strategy
	}
	if s.BinaryVersion == "" {
		s.BinaryVersion = DefaultBinaryVersion()
	}
	if s.EmulationVersion == "" {
		s.EmulationVersion = s.BinaryVersion
	}
	if s.Heartbeat == 0 {
		s.Heartbeat = 2 * s.LeaseDuration
	}
	return s, s.validate()
}

// validate returns every problem of s joined in one error.
func (s CandidateSpec) validate() error {
	var errs []error
	bad := func(field, value, why string) {
		errs = append(errs, fmt.Errorf("%s %q: %s", field, value, why))
	}
	if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
		bad("Namespace", s.Namespace, strings.Join(msgs, "; "))
	}
	for _, f := range []struct{ name, value string }{{"LeaseName", s.LeaseName}, {"Name", s.Name}} {
		if msgs := validation.IsDNS1123Subdomain(f.value); len(msgs) > 0 {
			bad(f.name, f.value, strings.Join(msgs, "; "))
		}
	}
	if s.Identity == "" {
		bad("Identity", s.Identity, "required")
	}
	if s.Strategy != coordinationv1.OldestEmulationVersion {
		msgs := validation.IsQualifiedName(string(s.Strategy))
		if !strings.Contains(string(s.Strategy), "/") {
			msgs = append(msgs, "a third-party strategy needs a prefix (example.com/name)")
		}
		if len(msgs) > 0 {
			bad("Strategy", string(s.Strategy), "not OldestEmulationVersion nor a qualified name: "+strings.Join(msgs, "; "))
		}
	}
	bv, err := version.ParseSemantic(s.BinaryVersion)
	if err != nil {
		bad("BinaryVersion", s.BinaryVersion, err.Error())
	}
	ev, err := version.ParseSemantic(s.EmulationVersion)
	if err != nil {
		bad("EmulationVersion", s.EmulationVersion, err.Error())
	} else if bv != nil && bv.LessThan(ev) {
		bad("EmulationVersion", s.EmulationVersion, "greater than BinaryVersion "+s.BinaryVersion)
	}
	if s.LeaseDuration < time.Second {
		bad("LeaseDuration", s.LeaseDuration.String(), "must be at least 1s")
	}
	if s.Heartbeat < time.Second {
		bad("Heartbeat", s.Heartbeat.String(), "must be at least 1s")
	}
	if o := s.Owner; o != nil && (o.APIVersion == "" || o.Kind == "" || o.Name == "" || o.UID == "") {
		bad("Owner", fmt.Sprintf("%s/%s %s uid=%s", o.APIVersion, o.Kind, o.Name, o.UID), "needs apiVersion, kind, name and uid")
	}
	if len(errs) > 0 {
		return fmt.Errorf("coordinated: invalid candidate: %w", errlist.Join(errs...))
	}
	return nil
}
