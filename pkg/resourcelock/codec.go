package resourcelock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxRecordBytes bounds the size of a record this package will decode; a
// larger annotation is treated as corrupt rather than parsed.
const maxRecordBytes = 64 << 10

// DecodeRecord parses a record in the JSON format of the ConfigMap
// annotation. Anything that is not such a record (bad JSON, wrong field types,
// trailing data, negative durations or counters, an oversized value, times
// outside the years 0000-9999 in UTC) yields an error wrapping
// ErrCorruptRecord. Unknown fields are ignored, as istiod does. Times are
// truncated to whole seconds, the precision of the wire format.
func DecodeRecord(raw []byte) (*Record, error) {
	if len(raw) > maxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the limit of %d", ErrCorruptRecord, len(raw), maxRecordBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	if rest := bytes.TrimSpace(raw[dec.InputOffset():]); len(rest) > 0 {
		return nil, fmt.Errorf("%w: trailing data after the record", ErrCorruptRecord)
	}
	if r.LeaseDurationSeconds < 0 {
		return nil, fmt.Errorf("%w: negative leaseDurationSeconds %d", ErrCorruptRecord, r.LeaseDurationSeconds)
	}
	if r.LeaderTransitions < 0 {
		return nil, fmt.Errorf("%w: negative leaderTransitions %d", ErrCorruptRecord, r.LeaderTransitions)
	}
	for _, t := range []*metav1.Time{&r.AcquireTime, &r.RenewTime} {
		// The wire format has second precision: drop the fraction EncodeRecord
		// would drop, so that a decoded record re-encodes to itself.
		t.Time = t.Truncate(time.Second)
		// An offset can move a parsable time out of the years RFC 3339 can
		// write in UTC; EncodeRecord would then write an unreadable record.
		if y := t.UTC().Year(); !t.IsZero() && (y < 0 || y > 9999) {
			return nil, fmt.Errorf("%w: time %s is outside the years 0000-9999 in UTC", ErrCorruptRecord, t.UTC().Format(time.RFC3339))
		}
	}
	return &r, nil
}

// EncodeRecord returns the canonical JSON encoding of r, as written into the
// ConfigMap annotation.
func EncodeRecord(r Record) []byte {
	// A Record holds only strings, ints and times: encoding cannot fail.
	raw, _ := json.Marshal(r)
	return raw
}
