package status

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/pkg/election"
)

// Leader is one entry of the leaders JSON object.
type Leader struct {
	Holder    string            `json:"holder"`
	HolderKey string            `json:"holderKey"`
	Lock      election.LockKind `json:"lock"`
	// RenewTime is the record's renew time, RFC 3339.
	RenewTime string `json:"renewTime"`
	// ExpireTime is when the lease runs out by the record (and the
	// holder's session, if it names one), RFC 3339: an instant, so that it
	// does not go stale once written as a remaining duration would.
	// Electors judge expiry by their own observation, so this assumes the
	// holder's and the reader's clocks agree.
	ExpireTime string `json:"expireTime"`
}

// snapshot is what the status says at one instant.
type snapshot struct {
	revisions []string
	leaders   map[string]Leader
}

// compute builds the snapshot from the locks found at now.
func compute(locks []lockstatus.Lock, now time.Time, ownRevision string, perRevision []string) snapshot {
	var live []lockstatus.Lock
	kinds := map[string]int{}
	for _, l := range locks {
		if l.Error != "" || !l.Held() || l.ExpiresIn(now) <= 0 {
			continue
		}
		live = append(live, l)
		kinds[l.Election]++
	}
	s := snapshot{revisions: []string{ownRevision}, leaders: map[string]Leader{}}
	for _, l := range live {
		if rev := revisionOf(l, perRevision); rev != "" {
			s.revisions = append(s.revisions, rev)
		}
		name := l.Election
		if kinds[name] > 1 {
			name += "/" + string(l.Kind)
		}
		s.leaders[name] = Leader{
			Holder:     l.Holder,
			HolderKey:  l.HolderKey,
			Lock:       l.Kind,
			RenewTime:  l.RenewTime.UTC().Format(time.RFC3339),
			ExpireTime: now.Add(l.ExpiresIn(now)).UTC().Format(time.RFC3339),
		}
	}
	slices.Sort(s.revisions)
	s.revisions = slices.Compact(s.revisions)
	return s
}

// revisionOf is the revision running a live lock's holder: the name suffix
// of a per-revision Lease, else the revision in the holder key; "" when
// unknown (a holder that writes no key).
func revisionOf(l lockstatus.Lock, perRevision []string) string {
	if l.Kind == election.LeaseLock {
		for _, id := range perRevision {
			if rev, ok := strings.CutPrefix(l.Election, id+"-"); ok && rev != "" {
				return rev
			}
		}
	}
	return l.Revision
}

// data is the ConfigMap content for s written by identity at now.
func (s snapshot) data(identity string, now time.Time) map[string]string {
	leaders, _ := json.Marshal(s.leaders) // a map of plain structs cannot fail
	return map[string]string{
		KeyRevisions:  strings.Join(s.revisions, "\n"),
		KeyLeaders:    string(leaders),
		KeyUpdatedBy:  identity,
		KeyUpdateTime: now.UTC().Format(time.RFC3339),
	}
}

// stale reports whether stored, the data of the ConfigMap as found, must be
// rewritten: when it says something other than s and identity, or when it
// was written heartbeat or longer ago. ownWrite is the exact time of this
// term's last write, if any: updateTime has second precision, and reading it
// back alone would make writes look up to a second older than they are.
func (s snapshot) stale(stored map[string]string, identity string, now, ownWrite time.Time, heartbeat time.Duration) bool {
	if stored[KeyRevisions] != strings.Join(s.revisions, "\n") || stored[KeyUpdatedBy] != identity {
		return true
	}
	written, err := time.Parse(time.RFC3339, stored[KeyUpdateTime])
	if err != nil {
		return true
	}
	if !ownWrite.IsZero() && ownWrite.UTC().Format(time.RFC3339) == stored[KeyUpdateTime] {
		written = ownWrite
	}
	if now.Sub(written) >= heartbeat {
		return true
	}
	var old map[string]Leader
	if err := json.Unmarshal([]byte(stored[KeyLeaders]), &old); err != nil || len(old) != len(s.leaders) {
		return true
	}
	for name, l := range s.leaders {
		o, ok := old[name]
		if !ok || o.Holder != l.Holder || o.HolderKey != l.HolderKey || o.Lock != l.Lock {
			return true
		}
	}
	return false
}
