package lockstatus

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Candidate is one LeaseCandidate of a coordinated election.
type Candidate struct {
	// Name is the LeaseCandidate's name: what the Lease's holder and
	// preferred holder name when this candidate holds or should hold it.
	Name string `json:"name"`
	// Identity is the candidate's meshd identity.
	Identity  string `json:"identity"`
	HolderKey string `json:"holderKey"`
	// Revision and Remote are parsed from HolderKey.
	Revision      string `json:"revision"`
	Remote        bool   `json:"remote"`
	BinaryVersion string `json:"binaryVersion"`
	// RenewTime is the candidate's last heartbeat; zero when it has none.
	RenewTime time.Time `json:"renewTime"`
	// Live is whether the candidate renewed recently enough to be picked.
	Live bool `json:"live"`
	// Rank is the candidate's place in the coordinator's order, 1 for the
	// best; 0 for a candidate that is not live and so is never picked.
	Rank int `json:"rank"`
}

// Candidates is what ListCandidates found in a namespace.
type Candidates struct {
	// DefaultRevision is the mesh's default revision the ranking used; ""
	// when none is known.
	DefaultRevision string
	// ByLease maps a Lease's name to its candidates: live ones best first,
	// then the others by name.
	ByLease map[string][]Candidate
	// Warning says why the ranking may be off (the default revision could
	// not be read); "" when all went well.
	Warning string
}

// SyncTimeout bounds the wait for the candidate cache in ListCandidates.
const SyncTimeout = 10 * time.Second

// ListCandidates reads the LeaseCandidates of namespace and ranks those of
// each Lease as the coordinator does (coordinated.Roster), judging liveness
// at now. A server that does not serve LeaseCandidates yields no candidates
// and no error; any other failure to read them (such as a missing RBAC
// permission to list or watch leasecandidates.coordination.k8s.io) is an
// error. The default revision is read as the daemon reads it; a failure to
// read it ranks without one and sets Warning.
func ListCandidates(ctx context.Context, client kubernetes.Interface, namespace string, now time.Time) (Candidates, error) {
	c := Candidates{ByLease: map[string][]Candidate{}}
	list, err := client.CoordinationV1beta1().LeaseCandidates(namespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return c, nil // the API server does not serve them
	case err != nil:
		return c, fmt.Errorf("list LeaseCandidates in %s: %w", namespace, err)
	case len(list.Items) == 0:
		return c, nil
	}
	def, err := defaultRevision(ctx, client, namespace)
	if err != nil {
		c.Warning = err.Error()
	}
	c.DefaultRevision = def
	roster, release, err := coordinated.NewRosters().Acquire(client, namespace, &fixedClock{now: now}) // a one-off read: shares nothing
	if err != nil {
		return c, fmt.Errorf("read LeaseCandidates in %s: %w", namespace, err)
	}
	defer release()
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, SyncTimeout, true,
		func(context.Context) (bool, error) { return roster.HasSynced(), nil })
	if err != nil {
		return c, fmt.Errorf("read LeaseCandidates in %s: cache not synced: %w", namespace, err)
	}
	for _, item := range list.Items {
		lease := item.Spec.LeaseName
		if _, done := c.ByLease[lease]; !done {
			c.ByLease[lease] = ranked(roster, lease, c.DefaultRevision)
		}
	}
	return c, nil
}

// ranked returns the candidates of lease in the Roster's order: its
// ranking of the live ones, then the others by name.
func ranked(r *coordinated.Roster, lease, defaultRevision string) []Candidate {
	all := r.Candidates(lease)
	byName := make(map[string]coordinated.Candidate, len(all))
	for _, c := range all {
		byName[c.Name] = c
	}
	out := make([]Candidate, 0, len(all))
	for _, m := range r.Ranked(lease, defaultRevision) {
		if c, ok := byName[m.Name]; ok {
			out = append(out, candidateView(c, len(out)+1))
			delete(byName, m.Name)
		}
	}
	for _, c := range all {
		if _, left := byName[c.Name]; left {
			out = append(out, candidateView(c, 0))
		}
	}
	return out
}

func candidateView(c coordinated.Candidate, rank int) Candidate {
	k := priority.ParseKey(c.Key)
	return Candidate{Name: c.Name, Identity: c.Identity, HolderKey: c.Key, Revision: k.Revision, Remote: k.Remote,
		BinaryVersion: c.BinaryVersion, RenewTime: c.RenewTime, Live: c.Live, Rank: rank}
}

// defaultRevision reads the mesh's default revision from the webhook the
// daemon follows (revisions.Options defaults). A missing webhook or label
// means none; other failures are returned.
func defaultRevision(ctx context.Context, client kubernetes.Interface, namespace string) (string, error) {
	name := revisions.DefaultWebhookName(namespace)
	wh, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("default revision unknown, candidates ranked without one: %w", err)
	}
	return wh.Labels[revisions.DefaultRevisionLabel], nil
}

// fixedClock is a clock stopped at one instant, so that every candidate's
// liveness is judged at the same time as the rest of the status.
type fixedClock struct{ now time.Time }

func (c *fixedClock) Now() time.Time                  { return c.now }
func (c *fixedClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }
