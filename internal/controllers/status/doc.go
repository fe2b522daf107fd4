// Package status is meshd's status controller, run by the leader of meshd's own
// election meshd-status-leader (ElectionID). It writes the ConfigMap
// meshd-status in the mesh namespace, a summary that tools read instead of
// decoding every lock:
//
//	revisions   the revisions that are running, sorted, one per line
//	leaders     JSON: election -> {holder, holderKey, lock, renewTime, expireTime}
//	updatedBy   the identity of the writer
//	updateTime  when it was written, RFC 3339
//
// Every other data key, label and annotation of the ConfigMap is kept.
//
// # What counts
//
// The locks are read with internal/lockstatus: every ConfigMap lock and
// Lease in the mesh namespace. Only held, unexpired, decodable locks count;
// a lock is unexpired when renewTime + leaseDuration is after now by the
// writer's clock, so clock skew between holder and writer shifts expiry by
// the skew. A running revision is the revision in the holder key of such a
// lock (without the remote prefix), or, for the per-revision Leases
// <id>-<rev> of Options.PerRevisionElections, the <rev> of the name; this
// instance's own revision is always included.
//
// leaders has one entry per counted lock, keyed by the lock's name (the
// election). Should a ConfigMap and a Lease of the same name both count,
// their entries are keyed <name>/ConfigMap and <name>/Lease. renewTime and
// expireTime are instants (RFC 3339), so an entry does not go stale once
// written; expireTime assumes the holder's and the reader's clocks agree.
//
// # When it writes
//
// The controller refreshes every Options.Interval, when the ConfigMap is
// changed or deleted by someone else, and on Trigger. A refresh writes only
// if what the status says changed: the revisions, the writer, or the holder,
// key or lock kind of any leader. Renewals alone do not count, so a steady
// mesh costs one write per heartbeat: at least every HeartbeatIntervals ×
// Interval (one minute by default) updateTime, renewTime and expireTime are
// refreshed even when nothing changed, so readers can tell a live status
// from an abandoned one. Each refresh lists the ConfigMaps and Leases of the
// mesh namespace.
package status
