package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults a run injects. "The leader" is the holder of one of the
// elections, chosen at random, at the moment of the fault.
const (
	// KillLeader SIGKILLs the leader and starts it again after a pause.
	KillLeader Kind = "kill-leader"
	// TermLeader SIGTERMs the leader (it releases its locks) and starts it
	// again after a pause.
	TermLeader Kind = "term-leader"
	// RestartAPIServer restarts kube-apiserver.
	RestartAPIServer Kind = "apiserver-restart"
	// RestartEtcd restarts etcd; the apiserver stays up.
	RestartEtcd Kind = "etcd-restart"
	// PartitionLeader cuts the leader off (its proxy holds every byte and
	// every new connection) for longer than a lease, then heals.
	PartitionLeader Kind = "partition-leader"
	// PartitionAll cuts every instance off for longer than a lease.
	PartitionAll Kind = "partition-all"
	// SlowLeader adds latency above the renew deadline, in each direction,
	// to the leader's connections for two leases.
	SlowLeader Kind = "latency-leader"
	// FlipDefault changes the default revision (the label of the webhook).
	FlipDefault Kind = "default-flip"
	// DeleteLock deletes a lock object.
	DeleteLock Kind = "delete-lock"
	// BogusHolder rewrites a lock by hand with a valid record naming a
	// holder that does not exist. In a run with sessions, every other one
	// on a Lease lock also names a session nobody has seen, as a
	// session-aware holder would.
	BogusHolder Kind = "bogus-holder"
	// CorruptRecord rewrites the ConfigMap lock's record with bytes that are
	// not a record.
	CorruptRecord Kind = "corrupt-record"
	// ResetLeader resets every connection of the leader.
	ResetLeader Kind = "reset-leader"
	// DeleteSession deletes the session Lease of the leader (runs with
	// sessions only). A deleted session is not an ended one: its holder
	// keeps leading and the session creates its Lease again at its next
	// heartbeat.
	DeleteSession Kind = "delete-session"
	// KillReportedLeader SIGKILLs the leader, reports its container
	// terminated (exit code 137) a second later as the kubelet of its node
	// would, and starts it again after a pause, reported as a restart of
	// the container (runs with Pods only): followers take over on the
	// report instead of the lease.
	KillReportedLeader Kind = "kill-leader-reported"
)

// AllKinds lists every kind that applies to every run, in the order reports
// use. Adding a kind here changes the plan every seed draws.
func AllKinds() []Kind {
	return []Kind{KillLeader, TermLeader, RestartAPIServer, RestartEtcd, PartitionLeader, PartitionAll,
		SlowLeader, FlipDefault, DeleteLock, BogusHolder, CorruptRecord, ResetLeader}
}

// SessionKinds lists the kinds that apply only to runs whose instances use
// sessions (Config.Sessions).
func SessionKinds() []Kind { return []Kind{DeleteSession} }

// PodKinds lists the kinds that apply only to runs whose instances run in
// Pods (Config.Pods).
func PodKinds() []Kind { return []Kind{KillReportedLeader} }

// KnownKinds is AllKinds followed by SessionKinds and PodKinds.
func KnownKinds() []Kind { return append(append(AllKinds(), SessionKinds()...), PodKinds()...) }

// DefaultKinds is what a run draws from unless told otherwise: AllKinds,
// and SessionKinds when the instances use sessions (PodKinds are added
// by a run with Pods).
func DefaultKinds(sessions bool) []Kind {
	if sessions {
		return append(AllKinds(), SessionKinds()...)
	}
	return AllKinds()
}

// ParseKinds reads a comma-separated list of kinds; "" or "all" is
// DefaultKinds(sessions).
func ParseKinds(list string, sessions bool) ([]Kind, error) {
	if strings.TrimSpace(list) == "" || strings.TrimSpace(list) == "all" {
		return DefaultKinds(sessions), nil
	}
	var out []Kind
	var unknown []string
	for _, name := range strings.Split(list, ",") {
		k := Kind(strings.TrimSpace(name))
		switch {
		case k == "":
		case !slices.Contains(KnownKinds(), k):
			unknown = append(unknown, string(k))
		case !slices.Contains(out, k):
			out = append(out, k)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown fault kinds %s; known: %s", strings.Join(unknown, ", "), kindNames(KnownKinds()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no fault kinds selected; known: %s", kindNames(KnownKinds()))
	}
	return out, nil
}

func kindNames(kinds []Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ",")
}

// healReferenced reports whether liveness after a fault of kind k is
// measured from when it healed rather than from when it was injected:
// while it lasts, no instance, or only a crippled one, can reach the API
// server.
func (k Kind) healReferenced() bool {
	switch k {
	case RestartAPIServer, RestartEtcd, PartitionAll, SlowLeader:
		return true
	}
	return false
}

// Fault is one planned fault with every random choice already made, so that
// a seed fixes the sequence. Which process is the leader is decided by the
// run, at the time of the fault.
type Fault struct {
	Kind Kind
	// Election indexes the run's elections: the one whose leader (or lock)
	// the fault targets.
	Election int
	// Hold is how long a partition or latency lasts.
	Hold time.Duration
	// Latency is the latency added by SlowLeader, in each direction.
	Latency time.Duration
	// RestartAfter is the pause before a killed or stopped leader starts again.
	RestartAfter time.Duration
	// Revision is the new default revision of FlipDefault ("" removes it).
	Revision string
	// Key is the holder key BogusHolder writes.
	Key string
	// Garbage is what CorruptRecord writes.
	Garbage string
	// Pause is the quiet time after the mesh recovered from this fault.
	Pause time.Duration
}

func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	switch f.Kind {
	case PartitionLeader, PartitionAll:
		fmt.Fprintf(&b, " for %v", f.Hold)
	case SlowLeader:
		fmt.Fprintf(&b, " +%v each way for %v", f.Latency, f.Hold)
	case KillLeader, TermLeader, KillReportedLeader:
		fmt.Fprintf(&b, ", restart after %v", f.RestartAfter)
	case FlipDefault:
		fmt.Fprintf(&b, " to %q", f.Revision)
	case BogusHolder:
		fmt.Fprintf(&b, " with key %q", f.Key)
	case CorruptRecord:
		g := f.Garbage
		if len(g) > 24 {
			g = fmt.Sprintf("%s... (%d bytes)", g[:24], len(g))
		}
		fmt.Fprintf(&b, " %q", g)
	}
	return b.String()
}

// garbage is what CorruptRecord may write into the ConfigMap lock's record.
func garbage() []string {
	return []string{
		"not a record",
		`["holderIdentity","x"]`,
		`{"holderIdentity":7,"leaseDurationSeconds":"30"}`,
		`{"holderIdentity":"intruder","leaseDurationSeconds":-5}`,
		`{"holderIdentity":"intruder","leaseDurationSeconds":30`,
		// Too large for DecodeRecord (64 KiB), small enough for the API
		// server (256 KiB of annotations).
		`{"holderIdentity":"` + strings.Repeat("x", 100<<10) + `"}`,
	}
}

// Plan draws n faults of the given kinds from seed. Every kind comes up once
// in each round of len(kinds) faults, in an order shuffled per round, so that
// even a short run covers them all. ttl scales the durations.
func Plan(seed uint64, n int, kinds []Kind, ttl time.Duration, elections int, revisions []string) []Fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x6d65736864)) // "meshd"
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	// Round to 10ms so that plans print readably.
	round := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	var out []Fault
	var deck []Kind
	for len(out) < n {
		if len(deck) == 0 {
			deck = slices.Clone(kinds)
			rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		f := Fault{Kind: deck[0], Election: rng.IntN(max(elections, 1))}
		deck = deck[1:]
		f.Pause = round(between(ttl/4, ttl/2))
		switch f.Kind {
		case PartitionLeader, PartitionAll:
			f.Hold = round(between(ttl+ttl/4, 2*ttl))
		case SlowLeader:
			f.Latency = round(between(ttl/2+ttl/16, ttl/2+ttl/4)) // above the renew deadline, ttl/2
			f.Hold = 2 * ttl
		case KillLeader, TermLeader, KillReportedLeader:
			// Sometimes back before its lease ran out (it resumes its own
			// record), sometimes after others took over.
			f.RestartAfter = round(between(0, 2*ttl))
		case FlipDefault:
			choices := append(slices.Clone(revisions), "")
			f.Revision = choices[rng.IntN(len(choices))]
		case BogusHolder:
			choices := []string{"unknown-revision", "^" + revisions[0]}
			choices = append(choices, revisions...)
			f.Key = choices[rng.IntN(len(choices))]
		case CorruptRecord:
			g := garbage()
			f.Garbage = g[rng.IntN(len(g))]
		}
		out = append(out, f)
	}
	return out
}
