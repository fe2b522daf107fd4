package resourcelock

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Record is the leader election record. Its JSON encoding is byte-for-byte the
// one istiod writes into ConfigMap locks; times have second precision.
type Record struct {
	// HolderIdentity is the identity of the holder; empty when nobody holds
	// the lock (after a graceful release).
	HolderIdentity string `json:"holderIdentity"`
	// HolderKey is the holder's priority key (for meshd, the revision, or
	// "^"+revision for a remote instance). It may be empty.
	HolderKey string `json:"holderKey"`
	// LeaseDurationSeconds is how long, after a change of the record is
	// observed, others must wait before they may take the lock.
	LeaseDurationSeconds int         `json:"leaseDurationSeconds"`
	AcquireTime          metav1.Time `json:"acquireTime"`
	RenewTime            metav1.Time `json:"renewTime"`
	// LeaderTransitions counts changes of holder. A meshd holder that
	// takes its own record back after its term ended counts it too (see
	// package elector).
	LeaderTransitions int `json:"leaderTransitions"`
}
