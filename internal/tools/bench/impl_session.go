package bench

import (
	"errors"

	"github.com/meshd-io/meshd/pkg/election"
)

// sessionOption is the option that puts a meshd election in session mode.
func sessionOption() (election.Option, error) {
	return nil, errors.New("session mode is not available in this build of pkg/election")
}
