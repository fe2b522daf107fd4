package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// kubeletTargetTTL is the ttl at which the kubelet failover has a target:
// the failover takes KubeletReportDelay plus at most kubeletTargetSlack
// from the kill, against client-go's lease.
const (
	kubeletTargetTTL   = 30 * time.Second
	kubeletTargetSlack = 100 * time.Millisecond
)

func kubeletFor(rs []KubeletResult, impl Impl, ttl time.Duration) (KubeletResult, bool) {
	for _, x := range rs {
		if x.Impl == impl && x.TTL == ttl {
			return x, true
		}
	}
	return KubeletResult{}, false
}

// p90 formats the nearest-rank 0.9-quantile.
func p90(d Durations) string {
	v, ok := d.Quantile(0.9)
	if !ok {
		return "n/a"
	}
	return fmtDur(v)
}

func (r *Results) writeKubelet(w io.Writer) {
	if len(r.Kubelet) == 0 {
		return
	}
	fmt.Fprintf(w, "### Failover after a crash reported by the kubelet\n\n")
	fmt.Fprintf(w, "Each replica is a process of its own in a Pod of its own (the benchmark creates the Pods and\n")
	fmt.Fprintf(w, "writes their status as the kubelet of their node would: the container running since the process\n")
	fmt.Fprintf(w, "started). Three replicas per trial; once they agree on the holder (and a meshd holder has published\n")
	fmt.Fprintf(w, "its Pod next to its record) and after a random pause, the holder's process is killed with SIGKILL,\n")
	fmt.Fprintf(w, "and %v later its container is reported terminated (exit code 137) with the Pod's UID, container\n", KubeletReportDelay)
	fmt.Fprintf(w, "and start the holder published. Measured from the kill to a successor's run function start.\n")
	fmt.Fprintf(w, "meshd runs with `WithPodIdentity` and `WithPodFailover` (what the daemon does with `POD_UID` and\n")
	fmt.Fprintf(w, "`CONTAINER_NAME` set) and takes over on the kubelet's report; client-go waits for the lease.\n")
	fmt.Fprintf(w, "Overlap is between the work of every replica, the killed one's ending when its process was reaped.\n\n")
	t := newTable("ttl", "implementation", "kill → start median", "p90", "overlap", "trials")
	t.right[1] = false
	for _, x := range r.Kubelet {
		med := "n/a"
		if m, ok := x.Latency.Median(); ok {
			med = fmtDur(m)
		}
		t.add(x.TTL.String(), string(x.Impl), med, p90(x.Latency), fmtOverlap(x.Overlap), trials(len(x.Latency), x.Errors))
	}
	t.write(w)
}

// kubeletRow is the Summary's target for the kubelet failover.
func kubeletRow(t *table, rs []KubeletResult) {
	m, ok := kubeletFor(rs, Meshd, kubeletTargetTTL)
	if !ok {
		return
	}
	limit := KubeletReportDelay + kubeletTargetSlack
	med, have := m.Latency.Median()
	parts := []string{"meshd " + medOrNA(m.Latency) + " (p90 " + p90(m.Latency) + ")"}
	if c, ok := kubeletFor(rs, ClientGo, kubeletTargetTTL); ok {
		parts = append(parts, "client-go "+medOrNA(c.Latency))
	}
	zero := true
	for _, x := range rs {
		zero = zero && x.Overlap.Pairs == 0
	}
	parts = append(parts, "overlap in every trial: "+map[bool]string{true: "0 ms", false: "**not 0**"}[zero])
	t.add(fmt.Sprintf("ttl %v: failover after a kubelet-reported crash under %v from the kill (the %v report + at most %v), 0 overlap",
		kubeletTargetTTL, limit, KubeletReportDelay, kubeletTargetSlack),
		strings.Join(parts, "; "), verdict(have && med < limit && len(m.Errors) == 0 && zero))
}

func medOrNA(d Durations) string {
	if m, ok := d.Median(); ok {
		return fmtDur(m)
	}
	return "n/a"
}
