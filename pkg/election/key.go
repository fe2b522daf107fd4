package election

import "github.com/meshd-io/meshd/internal/election/priority"

// DefaultRevision is the revision of an instance configured with none.
const DefaultRevision = priority.DefaultRevision
