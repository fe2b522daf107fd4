package sim

import (
	"encoding/json"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

func decodeHandover(raw string) lockmeta.Handover {
	var h lockmeta.Handover
	_ = json.Unmarshal([]byte(raw), &h) // a bad annotation reads as none
	return h
}
