package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/pkg/election"
)

func TestWriteCandidateTables(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 30, 0, time.UTC)
	locks := []lockstatus.Lock{
		{Election: "racing", Kind: election.LeaseLock, Holder: "meshd-a"},
		{Election: "istio-leader", Kind: election.LeaseLock, Holder: "istio-leader-stable-1-0a1b2c3d4e",
			Strategy: "meshd.io/prioritized", PreferredHolder: "istio-leader-canary-1-5f6a7b8c9d", PreferredHolderKey: "canary",
			Candidates: []lockstatus.Candidate{
				{Rank: 1, Name: "istio-leader-canary-1-5f6a7b8c9d", Identity: "canary-1", HolderKey: "canary", Revision: "canary",
					BinaryVersion: "1.1.0", RenewTime: now.Add(-3 * time.Second), Live: true},
				{Rank: 2, Name: "istio-leader-stable-1-0a1b2c3d4e", Identity: "stable-1", HolderKey: "stable", Revision: "stable",
					BinaryVersion: "1.0.0", RenewTime: now.Add(-time.Second), Live: true},
				{Name: "istio-leader-stable-remote-1-1122334455", Identity: "stable-remote-1", HolderKey: "^stable", Revision: "stable",
					Remote: true, BinaryVersion: "1.0.0", RenewTime: now.Add(-2 * time.Minute)},
				{Name: "istio-leader-x-6677889900"},
			}},
	}
	var out bytes.Buffer
	if err := writeCandidateTables(&out, locks, "canary", now); err != nil {
		t.Fatal(err)
	}
	want := `
Candidates of Lease istio-leader (strategy meshd.io/prioritized, preferred holder istio-leader-canary-1-5f6a7b8c9d, default revision canary):
RANK   CANDIDATE                                 IDENTITY          REVISION   REMOTE   VERSION   HEARTBEAT   LIVE    ROLE
1      istio-leader-canary-1-5f6a7b8c9d          canary-1          canary     false    1.1.0     3s ago      true    preferred
2      istio-leader-stable-1-0a1b2c3d4e          stable-1          stable     false    1.0.0     1s ago      true    holder
-      istio-leader-stable-remote-1-1122334455   stable-remote-1   stable     true     1.0.0     2m ago      false   -
-      istio-leader-x-6677889900                 -                 -          false    -         -           false   -
`
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}

	// Without candidates nothing is added to the racing table.
	out.Reset()
	if err := writeCandidateTables(&out, locks[:1], "", now); err != nil || out.Len() != 0 {
		t.Fatalf("racing lock: %q, %v", out.String(), err)
	}
}

func TestWriteLocksJSONCandidates(t *testing.T) {
	renew := time.Date(2026, 1, 2, 3, 4, 27, 0, time.UTC)
	locks := []lockstatus.Lock{
		{Election: "racing", Kind: election.LeaseLock, Namespace: "ns", Holder: "meshd-a", LeaseDuration: 15 * time.Second},
		{Election: "l", Kind: election.LeaseLock, Namespace: "ns", Holder: "l-a", Strategy: "meshd.io/prioritized",
			PreferredHolder: "l-b", PreferredHolderKey: "canary", LeaseDuration: 15 * time.Second,
			Candidates: []lockstatus.Candidate{{Rank: 1, Name: "l-b", Identity: "b", HolderKey: "canary", Revision: "canary",
				BinaryVersion: "1.1.0", RenewTime: renew, Live: true}}},
	}
	var out bytes.Buffer
	if err := writeLocksJSON(&out, locks); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"strategy", "preferredHolder", "preferredHolderKey", "candidates"} {
		if _, ok := got[0][k]; ok {
			t.Errorf("racing lock has %q: %v", k, got[0])
		}
	}
	c, _ := json.Marshal(got[1]["candidates"])
	const wantCands = `[{"binaryVersion":"1.1.0","holderKey":"canary","identity":"b","live":true,"name":"l-b","rank":1,"remote":false,"renewTime":"2026-01-02T03:04:27Z","revision":"canary"}]`
	if got[1]["strategy"] != "meshd.io/prioritized" || got[1]["preferredHolder"] != "l-b" ||
		got[1]["preferredHolderKey"] != "canary" || string(c) != wantCands {
		t.Fatalf("coordinated lock: %v\ncandidates %s", got[1], c)
	}
}
