// Package podexit lets a follower take over from a holder whose process is
// proven to have exited, without waiting for the holder's lease to run out
// (docs/handover.md, "Pod-aware failover").
//
// A holder that runs in a Pod publishes, next to its record, which Pod,
// container and run of that container it is (lockmeta.HolderPod): a
// Publisher reads the holder's own Pod and publishes the run only once the
// Pod's status shows the container running with a start that fits this
// process's start, so that the status describes this process and not an
// earlier run of the same container. Until then the holder publishes no
// mark and followers wait for its lease.
//
// A follower's Judge watches the Pod a holder's mark names (one watch per
// Pod, shared through Watches by every election of a program) and answers
// protocol.HolderExit: the lease ends at once only when the kubelet has
// reported the end of a run of that container at or after a moment the
// holder's process was alive, and that run is not older than the run the
// holder published. Everything else waits for the lease: a deleted or
// force-deleted Pod, a Pod of the same name with another UID, a deletion
// timestamp, an eviction, a node NotReady or unreachable, a missing Pod,
// a broken watch, a mark of another holder, a status that does not speak
// of the published run.
//
// # Why the proof is sound
//
// Runs of one container of one Pod are sequential: the kubelet starts a
// run only after the previous one has exited. The holder's mark carries
// ProcessStart, a reading of the holder's own clock taken while its
// process was alive; the kubelet's finishedAt of a run is taken by the
// container runtime on the same node, from the same clock. A run that
// ended at or after ProcessStart was alive at ProcessStart; if it is the
// holder's run, the holder has exited; if it is a later one, the holder's
// run ended before it started; it cannot be an earlier one, which ended
// before the holder's process started. finishedAt is stored in whole
// seconds, rounded down, so comparing it with ProcessStart only ever
// errs towards waiting. Stale Pod data cannot prove anything: a report of
// an end that has not happened does not exist, and an older status shows
// less, not more. The run's restart count is checked too, against the
// holder's published count: this guards against a wall clock stepped back
// between an earlier run's end and the holder's start.
//
// The proof assumes that the holder's process and the kubelet's runtime
// read one clock (true for containers sharing the node's kernel; not for
// VM-isolated runtimes, whose guest clock may lag: do not enable it
// there), and that the Pod identity a holder is given is its own (the
// downward API). A holder checks the latter: it publishes nothing unless
// its Pod's UID and container match and the container's start fits its
// process start.
package podexit
