package sim

import (
	"encoding/json"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func decodeHandover(raw string) resourcelock.Handover {
	var h resourcelock.Handover
	_ = json.Unmarshal([]byte(raw), &h) // a bad annotation reads as none
	return h
}
