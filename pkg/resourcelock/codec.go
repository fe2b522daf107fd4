package resourcelock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
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
//
// It is json.Marshal's encoding of r, byte for byte, and is written without
// encoding/json when the strings need no escaping: every read of a lock
// object and every renew encode a record, and the reflection of
// encoding/json costs time, allocations and a deep stack on the election's
// goroutine (see package elector, The stack of a waiting candidate). Other
// records go through encoding/json.
func EncodeRecord(r Record) []byte {
	if !lockmeta.PlainJSON(r.HolderIdentity) || !lockmeta.PlainJSON(r.HolderKey) {
		// A Record holds only strings, ints and times: encoding cannot fail.
		raw, _ := json.Marshal(r)
		return raw
	}
	b := make([]byte, 0, 192)
	b = append(b, `{"holderIdentity":"`...)
	b = append(b, r.HolderIdentity...)
	b = append(b, `","holderKey":"`...)
	b = append(b, r.HolderKey...)
	b = append(b, `","leaseDurationSeconds":`...)
	b = strconv.AppendInt(b, int64(r.LeaseDurationSeconds), 10)
	b = append(b, `,"acquireTime":`...)
	b = appendTime(b, r.AcquireTime)
	b = append(b, `,"renewTime":`...)
	b = appendTime(b, r.RenewTime)
	b = append(b, `,"leaderTransitions":`...)
	b = strconv.AppendInt(b, int64(r.LeaderTransitions), 10)
	return append(b, '}')
}

// appendTime appends t as metav1.Time marshals it: null when zero, else
// RFC 3339 in UTC, in quotes.
func appendTime(b []byte, t metav1.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339)
	return append(b, '"')
}
