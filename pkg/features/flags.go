package features

import (
	"fmt"
	"time"

	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Values accepted by prioritizedLeaderElectionLock (compared exactly);
// ElectionOptions maps them onto election.ConfigMapLock and
// election.LeaseLock.
const (
	lockConfigMap = "configmap"
	lockLease     = "lease"
)

// The project's flags, all on the default registry. Names and defaults match
// istiod where istiod has the same setting; the defaults are those of package
// election, so that a program that applies ElectionOptions in an empty
// environment gets the library's behaviour.
var (
	// EnableLeaderElection turns leader election on. When false, every run
	// function starts immediately and no lock is read or written.
	EnableLeaderElection = register(defaultRegistry, "ENABLE_LEADER_ELECTION", true,
		"Enables leader election. When false, run functions start immediately and no lock is touched.")

	// prioritizedLeaderElection turns stealing on for prioritized elections.
	// When false, the key comparison is not installed, so an instance of the
	// default revision (or a local instance) waits for the lock like any other.
	prioritizedLeaderElection = register(defaultRegistry, "PRIORITIZED_LEADER_ELECTION", true,
		"Enables prioritized leader election. When false, prioritized elections do not steal the lock from a lower-priority holder.")

	// LeaderElectionTTL is the lease duration. The renew deadline is half of
	// it and the retry period a quarter. It must be at least one second, the
	// precision of the lock record.
	LeaderElectionTTL = register(defaultRegistry, "LEADER_ELECTION_TTL", election.DefaultTTL,
		"Lease duration of leader election locks (at least 1s). The renew deadline is TTL/2 and the retry period TTL/4.",
		withValidator(func(d time.Duration) error {
			if d < time.Second {
				return fmt.Errorf("must be at least 1s, the precision of the lock record")
			}
			return nil
		}))

	// prioritizedLeaderElectionLock is the lock type of prioritized elections
	// that do not name one: "configmap" (what istiod uses) or "lease".
	prioritizedLeaderElectionLock = register(defaultRegistry, "PRIORITIZED_LEADER_ELECTION_LOCK", lockConfigMap,
		"Lock type of prioritized leader elections: `configmap` (compatible with istiod) or `lease`.",
		oneOf(lockConfigMap, lockLease))

	// defaultRevisionWebhook names the MutatingWebhookConfiguration whose
	// label holds the default revision. Empty means the istiod convention:
	// istio-revision-tag-default in istio-system, and
	// istio-revision-tag-default-<namespace> in any other mesh namespace (see
	// revisions.DefaultWebhookName).
	defaultRevisionWebhook = register(defaultRegistry, "DEFAULT_REVISION_WEBHOOK", "",
		"Name of the MutatingWebhookConfiguration marking the default revision. Empty means `istio-revision-tag-default`, or `istio-revision-tag-default-<namespace>` when the mesh namespace is not `istio-system`.")

	// revisionLabel is the label of that webhook holding the default revision.
	revisionLabel = register(defaultRegistry, "REVISION_LABEL", revisions.DefaultRevisionLabel,
		"Label of the default-revision webhook (see `DEFAULT_REVISION_WEBHOOK`) whose value is the default revision.")

	// LeaderElectionStopTimeout is how long a leader that stops leading
	// expects its run functions to take to return. It keeps the lock renewed
	// until they have returned; past this time it logs it and fails its
	// health check, so that a stuck process is restarted. It is capped at
	// (TTL - TTL/4)/2, so that the stop a holder promises fits in its lease.
	LeaderElectionStopTimeout = register(defaultRegistry, "LEADER_ELECTION_STOP_TIMEOUT", election.DefaultStopTimeout,
		"How long a leader that stops leading expects its run functions to take to return; it keeps the lock until they have, and fails /healthz past this time. Capped at (TTL - TTL/4)/2.")

	// leaderElectionReleaseOnCancel makes a leader release its lock when it
	// is stopped, so that another instance takes over at once instead of
	// after the TTL.
	leaderElectionReleaseOnCancel = register(defaultRegistry, "LEADER_ELECTION_RELEASE_ON_CANCEL", true,
		"Release the lock when a leader is stopped, so that another instance takes over without waiting for the TTL.")

	// leaderElectionWatch makes electors follow their lock with a watch
	// instead of polling it: followers make no requests while the holder is
	// alive and react to a release or expiry within milliseconds.
	leaderElectionWatch = register(defaultRegistry, "LEADER_ELECTION_WATCH", true,
		"Follow each lock with a watch instead of polling it. Followers then make no requests while the holder is alive and take over within milliseconds of a release or expiry; while the watch is broken they poll.")

	// leaderElectionHandover turns on cooperative preemption in prioritized
	// elections: a candidate that may take the lock first asks a meshd
	// holder to hand it over, so the two never lead at once.
	leaderElectionHandover = register(defaultRegistry, "LEADER_ELECTION_HANDOVER", true,
		"Cooperative preemption: a higher-priority candidate asks a meshd holder to stop and hand the lock over, instead of taking it while the holder still runs its work.")

	// leaderElectionMode is how the candidates of meshd's own Lease
	// elections agree on a leader (see election.Mode); the daemon applies
	// it, falling back to racing when the API server has no LeaseCandidates.
	// The daemon reads the variable as the default of its --election-mode
	// flag; it is registered here to be listed, documented and validated.
	leaderElectionMode = register(defaultRegistry, "LEADER_ELECTION_MODE", string(election.Racing),
		"How the candidates of meshd's own Lease elections agree on a leader: `racing` (each writes the lock; istiod's way), `coordinated` (LeaseCandidates and a meshd coordinator that applies the mesh's priority rule; needs coordination.k8s.io/v1beta1, else meshd races) or `oldest-emulation-version` (Kubernetes' own coordinator). istiod's ConfigMap elections always race.",
		oneOf(string(election.Racing), string(election.Coordinated), string(election.OldestEmulationVersion)))

	// leaderElectionSessions makes meshd's own racing Lease elections
	// renew through one session Lease per process (election.WithSessions).
	// The daemon reads the variable as the default of its --sessions flag;
	// it is registered here to be listed, documented and validated.
	leaderElectionSessions = register(defaultRegistry, "LEADER_ELECTION_SESSIONS", false,
		"Renew meshd's own racing Lease elections (status, revision) through one heartbeat Lease per process instead of one write per election per retry period. Every candidate of those elections must be a meshd with sessions; istiod's elections never use them.")

	// leaderElectionHandoverGrace is how long a candidate waits for a meshd
	// holder to answer a handover request before it takes the lock by force
	// (with a fenced start). An accepted request is then waited for until the
	// stop the holder promised. At least two retry periods are used, since a
	// polling holder answers at its next renew.
	leaderElectionHandoverGrace = register(defaultRegistry, "LEADER_ELECTION_HANDOVER_GRACE", election.DefaultHandoverGrace,
		"How long a candidate waits for a meshd holder to answer a handover request before taking the lock by force; at least two retry periods (TTL/2).")
)

// The Pod identity of the process, set by the chart through the downward
// API. POD_UID turns Pod-aware failover on (election.WithPodIdentity and
// election.WithPodFailover): a holder publishes its Pod and container next
// to its record, and followers take over as soon as the kubelet reports its
// container ended, instead of waiting for the lease. POD_NAME,
// POD_NAMESPACE and CONTAINER_NAME alone do not: many platforms set them
// for other purposes (istiod's charts set the first two). With POD_UID set,
// an incomplete identity is refused when the election is built.
var (
	// podName is the name of the Pod this process runs in.
	podName = register(defaultRegistry, "POD_NAME", "",
		"Name of the Pod meshd runs in (downward API `metadata.name`); used for Pod-aware failover (see `POD_UID`).")
	// podNamespace is the namespace of that Pod.
	podNamespace = register(defaultRegistry, "POD_NAMESPACE", "",
		"Namespace of the Pod meshd runs in (downward API `metadata.namespace`); used for Pod-aware failover (see `POD_UID`).")
	// podUID is the UID of that Pod; setting it turns Pod-aware failover on.
	podUID = register(defaultRegistry, "POD_UID", "",
		"UID of the Pod meshd runs in (downward API `metadata.uid`). When set, with `POD_NAME`, `POD_NAMESPACE` and `CONTAINER_NAME`, it turns on Pod-aware failover: followers take over as soon as the kubelet reports the holder's container ended, instead of waiting for the TTL (docs/handover.md).")
	// containerName is the name of this process's container in that Pod.
	containerName = register(defaultRegistry, "CONTAINER_NAME", "",
		"Name of meshd's container in its Pod, whose status the kubelet reports; used for Pod-aware failover (see `POD_UID`).")
)

// processStarted is a reading of the clock taken while this package is
// initialised, before main runs: the earliest moment the process can
// vouch it was alive, which a holder compares with the start of its
// container that the kubelet reports (see election.PodIdentity).
var processStarted = time.Now()

// podOptions are the Pod-aware failover options the environment implies:
// none unless POD_UID is set.
func podOptions() []election.Option {
	if podUID.Get() == "" {
		return nil
	}
	id := election.PodIdentity{
		Namespace: podNamespace.Get(), Pod: podName.Get(), UID: podUID.Get(), Container: containerName.Get(),
		ProcessStart: processStarted,
	}
	return []election.Option{election.WithPodIdentity(id), election.WithPodFailover(true)}
}
