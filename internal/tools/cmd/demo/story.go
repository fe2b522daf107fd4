package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
)

// Every step must meet its expectation within a bound; these are generous
// so that a slow machine passes, while the measured times are compared with
// meshd's targets in the summary.
const (
	settleTimeout = 15 * time.Second
	// flagTimeout bounds the wait for a new leader to say so on
	// /debug/elections once its lock record is seen.
	flagTimeout = 5 * time.Second
)

func (d *demo) story() error {
	steps := []func() error{d.step1, d.step2, d.step3, d.step4, d.step5, d.step6}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
		if err := d.ctx.Err(); err != nil {
			return err
		}
		if !d.scr.live {
			d.pollOnce(d.ctx)
			d.scr.snapshot()
		}
	}
	d.summary()
	return nil
}

// ---- 1 ----

func (d *demo) step1() error {
	d.scr.heading("1. No default revision is known: first come, first served")
	d.scr.note("canary-1 starts first. The other instances join later; since no default revision is")
	d.scr.note("known, nobody may steal the prioritized elections from it. Per-revision elections get")
	d.scr.note("one leader per revision.")
	if err := d.start("canary-1"); err != nil {
		return err
	}
	for _, name := range []string{namespaceLock, statusLock, perRevisionLock("canary")} {
		if _, err := d.waitHolder(name, settleTimeout, "canary-1 leads "+name, isHolder("canary-1")); err != nil {
			return err
		}
	}
	d.scr.say("canary-1 leads %s, %s and %s", namespaceLock, statusLock, perRevisionLock("canary"))

	if err := d.start("stable-1", "stable-2", "stable-remote-1"); err != nil {
		return err
	}
	l, err := d.waitHolder(perRevisionLock("stable"), settleTimeout, "a stable instance leads "+perRevisionLock("stable"), hasKey("stable"))
	if err != nil {
		return err
	}
	d.scr.say("%s leads %s: the stable revision's own election", l.Holder, perRevisionLock("stable"))

	hold := d.opts.ttl / 2
	d.scr.say("watching for %v: canary-1 must keep %s and %s", hold, namespaceLock, statusLock)
	since := time.Now()
	if err := sleep(d.ctx, hold); err != nil {
		return err
	}
	for _, name := range []string{namespaceLock, statusLock} {
		if ch := d.locks.changesSince(name, since); len(ch) > 0 {
			return fmt.Errorf("step 1: %s changed hands to %q although no default revision is known", name, ch[0].Holder)
		}
		if l, _ := d.locks.get(name); l.Holder != "canary-1" {
			return fmt.Errorf("step 1: %s is held by %q, want canary-1", name, l.Holder)
		}
	}
	d.scr.say("nobody stole them: without a default revision the first instance keeps leading")
	return d.checkPerRevision(true)
}

// ---- 2 ----

func (d *demo) step2() error {
	d.scr.heading("2. The default revision becomes stable")
	d.scr.note("The label %s=stable on the webhook %s", revisionLabel, webhookName(d.opts.namespace))
	d.scr.note("makes stable the default revision. Stable instances take the prioritized elections")
	d.scr.note("from canary-1; for the namespace election a local instance wins over stable-remote-1.")
	d.scr.note("Per-revision elections stay where they are.")
	stableHolder, _ := d.locks.get(perRevisionLock("stable"))

	flags := d.watchLeaderFlags(d.names()...)
	defer flags.stop()
	sent, err := d.setDefault("stable")
	if err != nil {
		return err
	}
	d.scr.say("set %s=stable", revisionLabel)
	const step = "2 default := stable"
	for _, name := range []string{namespaceLock, statusLock} {
		if _, err := d.handover(step, flags, name, "canary-1", sent, settled(name, "stable"), settleTimeout, time.Second); err != nil {
			return err
		}
	}
	if l, _ := d.locks.get(perRevisionLock("stable")); l.Holder != stableHolder.Holder {
		return fmt.Errorf("step 2: %s moved from %s to %s: per-revision elections must not preempt", perRevisionLock("stable"), stableHolder.Holder, l.Holder)
	}
	d.scr.say("%s still leads %s, canary-1 still leads %s", stableHolder.Holder, perRevisionLock("stable"), perRevisionLock("canary"))
	return d.checkPerRevision(true)
}

// ---- 3 ----

func (d *demo) step3() error {
	d.scr.heading("3. The default flips to canary: leadership moves")
	d.scr.note("canary-1 takes both prioritized elections back. The old leader stops its controllers")
	d.scr.note("first, then hands the lock over: no moment with two leaders. Times run from the label")
	d.scr.note("update to the new lock record and to what the leaders report on /debug/elections.")
	// Steals are damped to one per retry period per election: a flip back
	// within a retry period of the last one waits for it. The demo lets the
	// stable terms age by one retry period, so that what it shows is the
	// handover itself.
	retry := d.opts.ttl / 4
	d.scr.note("(The default changes at most once per retry period here: meshd damps a flip back within")
	d.scr.note("%v of the last one, so that candidates that disagree cannot take the lock back and forth.)", retry)
	time.Sleep(retry)
	oldNS, _ := d.locks.get(namespaceLock)
	oldSt, _ := d.locks.get(statusLock)

	flags := d.watchLeaderFlags(d.names()...)
	defer flags.stop()
	sent, err := d.setDefault("canary")
	if err != nil {
		return err
	}
	d.scr.say("set %s=canary", revisionLabel)
	for _, old := range []lock{oldNS, oldSt} {
		if _, err := d.handover("3 default := canary", flags, old.Name, old.Holder, sent, isHolder("canary-1"), settleTimeout, time.Second); err != nil {
			return err
		}
	}
	return d.checkPerRevision(true)
}

// ---- 4 ----

func (d *demo) step4() error {
	d.scr.heading("4. kill -9 the leader of the namespace election")
	victim, _ := d.locks.get(namespaceLock)
	st, _ := d.locks.get(statusLock)
	d.scr.note("A killed process cannot release its locks: the others take over once the lease (%v),", d.opts.ttl)
	d.scr.note("counted from the last renewal each of them saw, has run out. %s is the only canary", victim.Holder)
	d.scr.note("instance, so stable instances take over.")
	m := d.procs[victim.Holder]
	p := m.process()

	var survivors []string
	for _, n := range d.names() {
		if n != victim.Holder {
			survivors = append(survivors, n)
		}
	}
	flags := d.watchLeaderFlags(survivors...)
	defer flags.stop()
	lastWrite := map[string]time.Time{}
	for _, name := range []string{namespaceLock, statusLock} {
		l, _ := d.locks.get(name)
		lastWrite[name] = l.Written
	}
	killed := time.Now()
	if err := p.Kill(); err != nil {
		return err
	}
	m.setState("killed (SIGKILL)")
	d.scr.say("sent SIGKILL to %s (pid %d)", victim.Holder, p.Pid())
	stopProgress := d.progress(time.Second, func() string {
		l, _ := d.locks.get(namespaceLock)
		return fmt.Sprintf("%s names %s, last written %s ago", namespaceLock, orNone(l.Holder), time.Since(l.Written).Round(100*time.Millisecond))
	})
	defer stopProgress()

	const step = "4 kill -9"
	target := d.opts.ttl + 100*time.Millisecond
	for _, old := range []lock{victim, st} {
		if old.Holder != victim.Holder {
			continue
		}
		l, err := d.handover(step, flags, old.Name, victim.Holder, killed, heldByOtherThan(victim.Holder), d.opts.ttl+settleTimeout, target)
		if err != nil {
			return err
		}
		d.scr.note("that is %s after the last renewal of %s that the demo saw (lease %v)",
			ms(l.HolderSince.Sub(lastWrite[old.Name])), victim.Holder, d.opts.ttl)
	}
	stopProgress()
	flags.stop()

	d.scr.say("restarting %s: as an instance of the default revision it takes the prioritized elections back", victim.Holder)
	if err := d.start(victim.Holder); err != nil {
		return err
	}
	ready := time.Now()
	back := d.watchLeaderFlags(victim.Holder)
	defer back.stop()
	for _, name := range []string{namespaceLock, statusLock} {
		if _, err := d.waitHolder(name, settleTimeout, victim.Holder+" leads "+name+" again", isHolder(victim.Holder)); err != nil {
			return err
		}
		at, err := back.wait(d.ctx, victim.Holder, name, true, settleTimeout)
		if err != nil {
			return err
		}
		d.scr.note("%s: %s leads again %s after it was ready", name, victim.Holder, ms(max(0, at.Sub(ready))))
	}
	return d.checkPerRevision(true)
}

// ---- 5 ----

func (d *demo) step5() error {
	d.scr.heading("5. SIGTERM: a graceful stop hands the locks over at once")
	victim, _ := d.locks.get(namespaceLock)
	d.scr.note("On SIGTERM meshd stops its controllers, releases every lock it holds and exits 0.")
	d.scr.note("The followers watch the locks, so one of them takes over within milliseconds instead")
	d.scr.note("of waiting for the lease to run out.")
	m := d.procs[victim.Holder]
	p := m.process()

	flags := d.watchLeaderFlags(d.names()...)
	defer flags.stop()
	sent := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	m.setState("stopping (SIGTERM)")
	d.scr.say("sent SIGTERM to %s (pid %d)", victim.Holder, p.Pid())
	// Taking over later than ttl - retry period could be a plain expiry,
	// not a release: that is the bound of this step.
	bound := d.opts.ttl * 3 / 4
	for _, name := range []string{namespaceLock, statusLock} {
		l, err := d.handover("5 SIGTERM", flags, name, victim.Holder, sent, heldByOtherThan(victim.Holder), bound, 100*time.Millisecond)
		if err == nil && l.HolderSince.Sub(sent) > bound {
			err = fmt.Errorf("%s was taken over %s after SIGTERM, not within %v", name, ms(l.HolderSince.Sub(sent)), bound)
		}
		if err != nil {
			return fmt.Errorf("step 5: %w (a released lock is taken over long before its lease runs out)", err)
		}
		for _, c := range d.locks.changesSince(name, sent) {
			if c.Holder == "" {
				d.scr.note("%s released %s %s after SIGTERM; %s took it %s later",
					victim.Holder, name, ms(c.At.Sub(sent)), l.Holder, ms(l.HolderSince.Sub(c.At)))
				break
			}
		}
	}
	if err := p.Wait(15 * time.Second); err != nil {
		return fmt.Errorf("step 5: %s after SIGTERM: %s, want exit status 0", victim.Holder, meshdproc.DescribeExit(err))
	}
	exited := p.ExitedAt().Sub(sent)
	m.setState("exited 0 (SIGTERM)")
	d.scr.say("%s exited with status 0 (%s after SIGTERM)", victim.Holder, ms(exited))
	return d.checkPerRevision(false)
}

// ---- 7 ----

func (d *demo) summary() {
	// The final state stays on screen above the summary.
	if d.scr.live {
		d.pollOnce(d.ctx)
	}
	d.scr.close()
	d.scr.heading("7. Summary")
	ttl := d.opts.ttl
	d.scr.note("ttl %v: lease duration %v, renew deadline %v, retry period %v.", ttl, ttl, ttl/2, ttl/4)
	d.scr.note("LOCK: until the new holder's record reached a watch. LEADS: until the new leader said")
	d.scr.note("leader=true on /debug/elections (its controllers are starting).")
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tELECTION\tCHANGE\tLOCK\tLEADS\tMESHD TARGET\tRESULT")
	for _, r := range d.results {
		verdict := "met"
		if max(r.lock, r.leads) > r.target {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t< %s\t%s\n", r.step, r.election, r.change, ms(r.lock), ms(r.leads), ms(r.target), verdict)
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		d.scr.note("%s", line)
	}
	d.scr.note("For comparison, istiod's elector with the same ttl waits for its next jittered retry,")
	d.scr.note("%s to %s, after a default change or a graceful release, and %s to %s after a crash.",
		ms(ttl/4), ms(ttl*55/100), ms(ttl), ms(ttl*21/10))
	d.scr.note("At ttl %v (step 6) it waits %s to %s after a crash, whatever the kubelet reports.", podTTL, ms(podTTL), ms(podTTL*3/2))

	// The same view from the CLI.
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.opts.meshd, "status", "--kubeconfig="+d.kubeconfig, "--namespace="+d.opts.namespace)
	out, err := cmd.CombinedOutput()
	d.scr.say("the same locks from the CLI, meshd status --namespace %s:", d.opts.namespace)
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		d.scr.note("%s", line)
	}
	if err != nil {
		d.scr.note("(meshd status: %v)", err)
	}
}

// handover waits until the lock name, held by from, has settled with a
// holder that satisfies cond and says it leads, after the event at sent. On
// the way the lock may pass through other holders (a remote instance that a
// local one replaces at once). It prints and records the times, and when
// from stopped leading.
func (d *demo) handover(step string, flags *leaderFlags, name, from string, sent time.Time, cond func(lock) bool, timeout, target time.Duration) (lock, error) {
	deadline := time.Now().Add(timeout + flagTimeout)
	var (
		l     lock
		leads time.Time
	)
	for {
		if _, err := d.waitHolder(name, time.Until(deadline), name+" passes from "+from+" to another instance", cond); err != nil {
			return l, err
		}
		l, _ = d.locks.get(name)
		if cond(l) {
			if leads = flags.leading(l.Holder, name); !leads.IsZero() {
				break
			}
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("%s is held by %s, which did not say so on /debug/elections within %v", name, l.Holder, flagTimeout)
		}
		if err := sleep(d.ctx, flagPollEvery/2); err != nil {
			return l, err
		}
	}
	var via []string
	for _, c := range d.locks.changesSince(name, sent) {
		if c.At.Before(l.HolderSince) && c.Holder != "" && c.Holder != from {
			via = append(via, c.Holder)
		}
	}
	change := strings.Join(append(append([]string{from}, via...), l.Holder), " -> ")
	stopped := ""
	if p := d.procs[from].process(); p != nil && p.Running() {
		if at, err := flags.wait(d.ctx, from, name, false, 200*time.Millisecond); err == nil {
			stopped = fmt.Sprintf(", %s stopped leading at +%s", from, ms(max(0, at.Sub(sent))))
		}
	}
	d.scr.say("%s: %s: lock record at +%s%s, %s leads at +%s",
		shortName(name), change, ms(l.HolderSince.Sub(sent)), stopped, l.Holder, ms(leads.Sub(sent)))
	// Two leaders at once would show as the old leader answering "leader"
	// to a request sent after the new leader's "leader" answer arrived.
	if last := flags.lastLeading(from, name); !last.IsZero() && last.After(leads) {
		d.scr.note("WARNING: %s still said leader=true %s after %s did: two leaders at once", from, ms(last.Sub(leads)), l.Holder)
		d.record(result{step: step, election: shortName(name), change: "two leaders: " + from + " and " + l.Holder,
			lock: last.Sub(leads), leads: last.Sub(leads), target: 0})
	}
	d.record(result{step: step, election: shortName(name), change: change,
		lock: l.HolderSince.Sub(sent), leads: leads.Sub(sent), target: target})
	return l, nil
}

func (d *demo) waitHolder(name string, timeout time.Duration, what string, cond func(lock) bool) (lock, error) {
	return d.locks.waitLock(d.ctx, timeout, name, what, cond)
}

// checkPerRevision verifies that each per-revision lock is held by an
// instance of its own revision (canary only while canary-1 runs).
func (d *demo) checkPerRevision(canaryRunning bool) error {
	revs := []string{"stable"}
	if canaryRunning {
		revs = append(revs, "canary")
	}
	for _, rev := range revs {
		l, ok := d.locks.get(perRevisionLock(rev))
		if !ok || l.Key != rev {
			return fmt.Errorf("%s is held by %q (key %q), want an instance of revision %s", perRevisionLock(rev), l.Holder, l.Key, rev)
		}
	}
	return nil
}

// progress prints line() every interval while the output is not a
// terminal (where the live table shows the same). The returned function
// stops it and may be called more than once.
func (d *demo) progress(every time.Duration, line func() string) func() {
	if d.scr.live {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				d.scr.note("... %s", line())
			}
		}
	}()
	var closed bool
	return func() {
		if !closed {
			closed = true
			close(done)
			<-stopped
		}
	}
}

// settled matches the state a prioritized lock settles in when rev is the
// best revision available: held by an instance of rev, and for the
// remote-aware namespace lock by a local one.
func settled(lockName, rev string) func(lock) bool {
	if lockName == namespaceLock {
		return hasKey(rev)
	}
	return hasRevision(rev)
}

// heldByOtherThan matches a lock held by anyone but name.
func heldByOtherThan(name string) func(lock) bool {
	return func(l lock) bool { return l.Holder != "" && l.Holder != name }
}

func isHolder(name string) func(lock) bool {
	return func(l lock) bool { return l.Holder == name }
}

// hasKey matches a held lock whose holder key is exactly key: "stable" is a
// local stable instance, "^stable" a remote one.
func hasKey(key string) func(lock) bool {
	return func(l lock) bool { return l.Holder != "" && l.Key == key }
}

// hasRevision matches a held lock whose holder is of revision rev, local or
// remote.
func hasRevision(rev string) func(lock) bool {
	return func(l lock) bool { return l.Holder != "" && priority.ParseKey(l.Key).Revision == rev }
}

func orNone(s string) string {
	if s == "" {
		return "nobody"
	}
	return s
}

// ms formats a duration for people: 37ms, 4.03s.
func ms(d time.Duration) string {
	if d < 10*time.Second && d > -10*time.Second {
		if d < time.Second && d > -time.Second {
			return d.Round(time.Millisecond).String()
		}
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
