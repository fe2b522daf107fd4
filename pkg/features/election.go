package features

import (
	"github.com/meshd-io/meshd/pkg/election"
)

// ElectionOptions returns the election options that the environment implies,
// one for each flag that configures elections, as election.Defaults: the
// environment configures every election of the program, and an election a
// flag does not apply to (WithHandover for a per-revision one, say) ignores
// it instead of refusing it. Package election never reads the environment
// itself: a program opts in by passing these options first, so that its own
// options still win:
//
//	opts := append(features.ElectionOptions(), election.WithLogger(log))
//	le, err := election.New(client, spec, opts...)
//
// In an empty environment they restate the library's defaults. Reading the
// flags follows the registry's rules: each is read once per process, and an
// invalid value means its default (Validate reports it).
func ElectionOptions() []election.Option {
	lock := election.ConfigMapLock
	if prioritizedLeaderElectionLock.Get() == lockLease {
		lock = election.LeaseLock
	}
	return []election.Option{election.Defaults(append([]election.Option{
		election.WithEnabled(EnableLeaderElection.Get()),
		election.WithPrioritized(prioritizedLeaderElection.Get()),
		election.WithTTL(LeaderElectionTTL.Get()),
		election.WithDefaultLock(lock),
		election.WithRevisionWebhook(defaultRevisionWebhook.Get(), revisionLabel.Get()),
		election.WithStopTimeout(LeaderElectionStopTimeout.Get()),
		election.WithReleaseOnCancel(leaderElectionReleaseOnCancel.Get()),
		election.WithWatch(leaderElectionWatch.Get()),
		election.WithHandover(leaderElectionHandover.Get(), leaderElectionHandoverGrace.Get()),
	}, podOptions()...)...)}
}
