package session

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshd-io/meshd/internal/election/coordinated"
)

// LeasePrefix begins the name of every session Lease.
const LeasePrefix = "meshd-session-"

// Label marks every session Lease, with the value "true".
const Label = "meshd.io/session"

// TokenAnnotation holds the token of the session that last wrote the Lease.
const TokenAnnotation = "meshd.io/session-token"

// LeaseName is the name of the session Lease of identity with the given
// lease duration: "meshd-session-<duration>-<identity>-<hash>" (the
// duration as "30s", or "1500ms" when it is not whole seconds), a valid
// object name for any identity. Sessions of different lease durations are
// different Leases, so one process may run elections of several ttls.
func LeaseName(identity string, leaseDuration time.Duration) string {
	label := fmt.Sprintf("%ds", leaseDuration/time.Second)
	if leaseDuration%time.Second != 0 {
		label = fmt.Sprintf("%dms", leaseDuration.Milliseconds())
	}
	return coordinated.CandidateName(LeasePrefix+label, identity)
}

// Ref is how a record names a session: "<lease name>/<token>".
func Ref(leaseName, token string) string { return leaseName + "/" + token }

// ParseRef splits a Ref; false when ref is not one.
func ParseRef(ref string) (leaseName, token string, ok bool) {
	leaseName, token, ok = strings.Cut(ref, "/")
	return leaseName, token, ok && leaseName != "" && token != ""
}

// leaseSeconds is d in whole seconds, rounded up.
func leaseSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// nameLease is the lease duration a session Lease's name states (see
// LeaseName), rounded up to whole seconds as the Lease itself keeps it; a
// label in milliseconds was cut down to them, so the lease may be up to a
// millisecond longer. False when name is not one.
func nameLease(name string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(name, LeasePrefix)
	if !ok {
		return 0, false
	}
	label, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(label)
	if strings.HasSuffix(label, "ms") {
		d += time.Millisecond
	}
	return time.Duration(leaseSeconds(d)) * time.Second, err == nil && d > 0
}
