package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// table renders who leads what: every lock in the mesh namespace as the
// watch last saw it, every meshd process with the elections it says it
// leads, and what the status controller wrote.
func (d *demo) table() []string {
	now := time.Now()
	d.mu.Lock()
	def, watcher := d.def, d.locks
	d.mu.Unlock()
	if def == "" {
		def = "none known"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "namespace %s | ttl %v | default revision: %s\n", d.opts.namespace, d.opts.ttl, def)
	b.WriteString("\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tKIND\tHOLDER\tKEY\tHELD FOR\tEXPIRES\tTRANSITIONS")
	if watcher != nil {
		locks, _ := watcher.snapshot()
		if len(locks) == 0 {
			fmt.Fprintln(tw, "(no locks yet)\t\t\t\t\t\t")
		}
		for _, l := range locks {
			holder, key, held, expires := l.Holder, l.Key, "", ""
			switch {
			case l.Err != "":
				holder, key = "(unreadable record)", ""
			case holder == "":
				holder, key = "(released)", ""
			default:
				held = now.Sub(l.HolderSince).Round(100 * time.Millisecond).String()
				if left := l.Written.Add(l.LeaseDuration).Sub(now); left > 0 {
					expires = "in " + left.Round(100*time.Millisecond).String()
				} else {
					expires = "expired"
				}
			}
			if key == "" {
				key = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", l.Name, l.Kind, holder, key, held, expires, l.Transitions)
		}
	}
	tw.Flush()
	b.WriteString("\n")

	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tREVISION\tCLUSTER\tPID\tSTATE\tLEADS")
	for _, m := range d.members() {
		where := "local"
		if m.remote {
			where = "remote"
		}
		pid, state := "-", ""
		p := m.process()
		m.mu.Lock()
		state = m.state
		if p != nil && p.Running() {
			pid = fmt.Sprint(p.Pid())
			if m.pollErr != nil && state == "ready" {
				state = "not answering"
			}
		}
		m.mu.Unlock()
		leads := strings.Join(m.leads(), ", ")
		if leads == "" {
			leads = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.name, m.revision, where, pid, state, leads)
	}
	tw.Flush()

	if watcher != nil {
		if _, status := watcher.snapshot(); status != nil {
			revs := strings.Join(strings.Fields(status["revisions"]), ", ")
			age := ""
			if t, err := time.Parse(time.RFC3339, status["updateTime"]); err == nil {
				age = " " + max(0, now.Sub(t)).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(&b, "\n%s (status controller): written by %s%s, running revisions: %s\n", statusConfigMap, status["updatedBy"], age, revs)
		}
	}
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}
