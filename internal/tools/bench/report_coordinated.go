package bench

import (
	"fmt"
	"io"
)

// writeCoordinated reports the coordinated mode next to meshd's racing
// figures of the same run, when those sections ran.
func (r *Results) writeCoordinated(w io.Writer) {
	c := r.Coordinated
	if c == nil {
		return
	}
	fmt.Fprintf(w, "## Coordinated mode\n\n")
	fmt.Fprintf(w, "Three meshd candidates of one prioritized election in `Coordinated` mode (revisions %q local, %q remote,\n", revB, revB)
	fmt.Fprintf(w, "and %q), each with the coordinator election its process would run, at ttl %v, on a second control plane\n", revA, r.Config.TTL)
	fmt.Fprintf(w, "whose kube-apiserver has `%s` and `%s` (started for this section only,\n", CoordinatedAPIServerFlags[0], CoordinatedAPIServerFlags[1])
	fmt.Fprintf(w, "so the racing figures come from a plain API server). Every candidate has its own clientset and follows the\n")
	fmt.Fprintf(w, "default revision through the webhook label.\n\n")
	fmt.Fprintf(w, "**Default flip** between the local stable instance and the canary, from the update of the webhook: the\n")
	fmt.Fprintf(w, "coordinator sees the change, names the new best in `spec.preferredHolder`, the holder stops its work and writes the\n")
	fmt.Fprintf(w, "Lease to it. The racing row is meshd's steal of the steal section (two candidates sharing one in-process\n")
	fmt.Fprintf(w, "default watcher, so the change reaches them at the same instant, with no watch event in between).\n")
	fmt.Fprintf(w, "The coordinated overlap is over the whole scenario: flips and graceful stops.\n\n")
	t := newTable("mode", "new leader starts", "old leader stops", "complete", "overlap", "trials")
	if s, ok := stealFor(r.Steal, Meshd); ok {
		t.add("racing (steal)", medP99(s.Start), medP99(s.Stop), medP99(s.Done), fmtOverlap(s.Overlap), trials(len(s.Done), s.Errors))
	}
	f := c.Flip
	t.add("coordinated", medP99(f.Start), medP99(f.Stop), medP99(f.Done), fmtOverlap(c.Overlap), trials(len(f.Done), c.Errors))
	t.write(w)
	fmt.Fprintf(w, "**Graceful stop** of the holder (the local stable instance, candidate and coordinator election cancelled):\n")
	fmt.Fprintf(w, "from the cancellation to the start of the next best candidate's run function (the remote stable\n")
	fmt.Fprintf(w, "instance), and in how many trials the Lease went straight to it (no other holder and no empty holder in\n")
	fmt.Fprintf(w, "between, from a watch of every write). A new local stable instance then joins and takes the lock back.\n")
	fmt.Fprintf(w, "The racing row is meshd's handover of the handover section (a plain election: any follower may be next).\n\n")
	t = newTable("mode", "next leader starts", "straight to the next best", "trials")
	if h, ok := takeoverFor(r.Handover, Meshd); ok {
		t.add("racing (handover)", medP99(h.Latency), "n/a (no ranking)", trials(len(h.Latency), h.Errors))
	}
	t.add("coordinated", medP99(c.Stop), fmt.Sprintf("%d of %d", c.Direct, len(c.Stop)), trials(len(c.Stop), c.Errors))
	t.write(w)
}
