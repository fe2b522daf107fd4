// Package bench measures meshd's elections against client-go's elector and
// against meshd's own polling mode (istiod's behaviour), on a real
// kube-apiserver and etcd on 127.0.0.1. It produces reports, not test
// verdicts; internal/tools/cmd/bench runs it ("make bench") and writes
// docs/benchmarks.md.
//
// Files by concern: impl*.go adapt the implementations to Candidate;
// transport.go counts the requests each clientset sends, and leasereqs.go
// the requests a scale replica sends to each Lease; track.go records
// run-function intervals in a ledger and waits on them; takeover.go,
// steal.go, forced.go and requests.go are the in-process scenarios;
// coordinated.go measures the coordinated mode, on a control plane started
// with CoordinatedAPIServerFlags; scale.go and replica.go run replicas as
// separate processes, cell by cell of a ScaleMatrix; report*.go and
// table.go render Markdown; stats.go computes medians, quantiles and
// ratios.
package bench
