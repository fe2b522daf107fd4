// Package chaos runs meshd under faults and checks that it keeps its
// promises. A run starts several "meshd run" processes of two revisions
// against a real kube-apiserver (internal/testing/testcluster), each reaching it
// through its own fault proxy (internal/testing/faultproxy) and writing a ledger of
// its controller terms. It injects a seeded, reproducible sequence of faults
// (see Kind), one at a time, waiting after each until every election has a
// leader again. Then it stops the processes and checks:
//
//   - safety: no two processes ran the controllers of one election at the
//     same time (the merged ledgers have no overlap);
//   - liveness: after every fault every election had a leader again within
//     Bound, counted from the fault, or from its end for the faults that cut
//     everyone off (a partition of all, the API server or etcd restarting,
//     latency on the leader);
//   - no thrash: the terms started stay within a few per fault;
//   - no data loss: labels, annotations and data keys seeded into the lock
//     objects and into the ConfigMaps meshd's controllers write are still
//     there, and every istio-ca-root-cert holds the current certificate;
//   - no crash: no meshd exited unless it was told to.
//
// With Config.Sessions every instance runs with --sessions (meshd's own
// Lease elections renew through one session Lease per process) and the
// fault DeleteSession is drawn as well. With Config.Pods ("make chaos")
// every instance runs in a Pod whose status the run writes as a kubelet
// would (running at each start, a restart at each start after an exit),
// with the downward-API environment that turns meshd's Pod-aware failover
// on, and the fault KillReportedLeader is drawn as well: a SIGKILL whose
// end the run reports a second later, on which followers may take over
// before the lease ends. The ledgers then check that none did while the
// killed process's work ran.
//
// internal/tools/cmd/chaos is the command line; test/reliability runs a short,
// fixed-seed variant in the tests.
package chaos
