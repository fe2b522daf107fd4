package bench

import (
	"github.com/meshd-io/meshd/pkg/election"
)

// sessionOption is the option that puts a meshd election in session mode:
// the process's one heartbeat Lease renews the records it holds.
func sessionOption() (election.Option, error) {
	return election.WithSessions(true), nil
}
