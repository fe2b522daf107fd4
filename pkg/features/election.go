package features

import (
	"github.com/meshd-io/meshd/pkg/election"
)

// ElectionOptions returns the election options that the environment implies,
// one for each flag that configures elections. Package election never reads
// the environment itself: a program opts in by passing these options first,
// so that its own options still win:
//
//	opts := append(features.ElectionOptions(), election.WithLogger(log))
//	le, err := election.New(client, spec, opts...)
//
// In an empty environment they restate the library's defaults. Reading the
// flags follows the registry's rules: each is read once per process, and an
// invalid value means its default (Validate reports it).
func ElectionOptions() []election.Option {
	// The flag's validator admits only values that parse.
	lock, err := election.ParseLockKind(PrioritizedLeaderElectionLock.Get())
	if err != nil {
		lock = election.ConfigMapLock
	}
	opts := []election.Option{
		election.WithEnabled(EnableLeaderElection.Get()),
		election.WithPrioritized(PrioritizedLeaderElection.Get()),
		election.WithTTL(LeaderElectionTTL.Get()),
		election.WithDefaultLock(lock),
		election.WithRevisionWebhook(DefaultRevisionWebhook.Get(), RevisionLabel.Get()),
		election.WithStopTimeout(LeaderElectionStopTimeout.Get()),
		election.WithReleaseOnCancel(LeaderElectionReleaseOnCancel.Get()),
		election.WithWatch(LeaderElectionWatch.Get()),
		election.WithHandover(LeaderElectionHandover.Get(), LeaderElectionHandoverGrace.Get()),
	}
	return append(opts, podOptions()...)
}
