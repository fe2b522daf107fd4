// Package identity draws the holder identity of a process that names none.
package identity

import (
	"crypto/rand"
	"encoding/hex"
	"os"
)

// Draw returns a holder identity: the host name and a random suffix, so
// that two processes on one host (or two pods sharing a host name) never
// share an identity by accident and each believe they hold the lock. Every
// call draws a new suffix; the elections of one election.Shared use the one
// its Identity drew.
func Draw() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix) // never fails (crypto/rand panics rather than return an error)
	return host + "_" + hex.EncodeToString(suffix)
}
