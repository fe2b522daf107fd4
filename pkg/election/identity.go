package election

import (
	"crypto/rand"
	"encoding/hex"
	"os"
)

// NewIdentity returns a holder identity unique to this call:
// <hostname>_<16 random hex digits>. It is what an empty identity becomes.
// Two processes on one host, or two elections built without an identity in
// one process, never share it by accident, which would make both believe
// they hold the same lock. Pass the Pod name (or another name stable over a
// process's life and unique in the mesh) to get readable holders instead.
func NewIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	var b [8]byte
	// crypto/rand.Read never fails on supported platforms.
	_, _ = rand.Read(b[:])
	return host + "_" + hex.EncodeToString(b[:])
}
