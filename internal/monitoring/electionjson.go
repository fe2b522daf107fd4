package monitoring

import (
	"encoding/json"
	"time"

	"github.com/meshd-io/meshd/pkg/election"
)

// MarshalJSON writes the election as /debug/elections shows it: the
// status's fields at the top level, then identity, cluster and problems. An
// instance that has never started or stopped leading (a follower since it
// started) has no lastTransitionTime, rather than 0001-01-01.
func (e Election) MarshalJSON() ([]byte, error) {
	var last *time.Time
	if !e.LastTransitionTime.IsZero() {
		t := e.LastTransitionTime
		last = &t
	}
	return json.Marshal(struct {
		election.Status
		// Shadows Status.LastTransitionTime: a field of the outer struct
		// wins over one of an embedded struct with the same JSON name.
		LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
		Identity           string     `json:"identity"`
		Cluster            string     `json:"cluster,omitempty"`
		Problems           []string   `json:"problems,omitempty"`
	}{e.Status, last, e.Identity, e.Cluster, e.Problems})
}
