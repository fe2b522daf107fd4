package sim

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Scenario is a named regression case: a fixed schedule, usually with
// checks of its own besides the invariants.
type Scenario struct {
	Name string
	// Case says which reproduced problem it guards against.
	Case     string
	Schedule Schedule
	// Subprocess runs the scenario in a child process, because the failure
	// it guards against (a panic) ends the process that runs it.
	Subprocess bool
}

// Scenarios returns every named regression case.
func Scenarios() []Scenario {
	return append([]Scenario{
		stealStorm(false), stealStorm(true),
		refusedRequestAskedAgain(),
		graceFromRequestWithPollingHolder(),
		workOutlivesStopTimeout(), smallTTLDefaultStopTimeout(),
		handedOverCandidateRetries(),
		recreateIsNotRelease(resourcelock.ConfigMapsResourceLock), recreateIsNotRelease(resourcelock.LeasesResourceLock),
		ancientRequestForGhost(),
		forcedStealFromIstiod(), forcedStealFromHungHolder(),
		runFunctionIgnoresContext(), panickingRunFunction(),
		foreignWritesKeepDeadHolder(),
		fencedHolderHandsOverAtFence(), ambiguousStealKeepsFence(), fenceSurvivesLostTerm(),
		failingRunFunctionBacksOff(), stealChainOnePerRetryPeriod(),
		recreateHolderWritesAtOnce(resourcelock.ConfigMapsResourceLock), recreateHolderWritesAtOnce(resourcelock.LeasesResourceLock),
		recreateNewcomerWaits(), slowReadObservedOnReturn(),
		sessionHolderQuiet(),
		sessionRefusalReconsidered(),
		handoverWriteFails(resourcelock.ConfigMapsResourceLock), handoverWriteFails(resourcelock.LeasesResourceLock),
		sessionSeed(100104831, "a process that took the lock by force crashed before its fenced start, came back under its own identity, found its own record and started its work at once, while the holder it had taken the lock from still stopped (found by make sim-long)"),
		wipedLockTakenWhenItsWaitEnds(),
		sessionSeed(200010849, "a follower whose watch broke listed the Leases again: the list handed it the lock, naming the session of a holder that had restarted under a new token, before that holder's session Lease, and its own heartbeat, sent at the same instant as it judged that session over, before both; it took the echo for proof and the lock while the holder worked (found by make sim-long)"),
		sessionSeed(100017530, "a holder that took the lock by force accepted a handover request, lost its term to a pause, and kept its promise at its next contention before its fence had passed: the candidate started beside the work of the holder it had taken the lock from (found by make sim-long)"),
		classicSeed(100543529, "the lock object was re-created without a record twice in a row while its meshd holder was paused, and a holder of client-go's shape took the empty object: an overlap no meshd elector can prevent, which the checker did not excuse because it stopped at the second deletion, of an object without a record (found by make sim-long)"),
		classicSeed(100035312, "a polling follower whose reads failed while the holder renewed took the lock object re-created without a record one lease after the older record it had seen, while the holder's work still ran (found by make sim-long)"),
		withPriority(sessionSeed(1839, "a holder restarted under its own identity accepted a request before its inherited fence, released the lock at the fence for the candidate and took it back at once: the candidate, alive and entitled, waited a RetryPeriod more and the lesser holder's work started meanwhile (found by the priority invariant)")),
		withPriority(classicSeed(991594, "a fenced holder released the lock at its fence for the polling candidate it had accepted; a lesser candidate that watched took it first, and the entitled holders took it back by force, each with a new fence, for longer than the liveness bound (found by the priority invariant)")),
		withPriority(sessionSeed(3683, "a holder accepted a request, crashed, came back under its own identity and renewed without naming the candidate, which waited on the old acceptance for as long as the holder renewed (found by the priority invariant)")),
		classicSeed(200025106, "a meshd holder waiting out its fence, polling, found at its next renew its lock object re-created without a record a second time: it wrote its record again and started at its old fence, unaware that a holder of client-go's shape had taken the first empty object and still worked (found by make sim-long)"),
		withPriority(sessionSeed3349()),
		drawnSessionSeed(1969, "a follower's watch ended without an error and client-go's reflector waited out a back-off of several seconds before it listed again, while the shared watch counted itself healthy; the list handed it its own session heartbeat before the holder's, in the order of names, and it took that echo for proof that the holder's session was over and the lock while the holder worked (found by the generator of every combination)"),
		drawnSeed(774, "a candidate took the lock by force, its start fenced by the lease of the holder it took it from, and crashed before its fence; the kubelet reported its exit and its restarted process, following its Pod, took the lock on that proof and started at once, beside the work of the holder before, still stopping: the proof ended the crashed holder's lease but not the one its fence waited for; a holder now publishes its Pod mark only while its work runs (found by the generator with Pods)"),
		classicSeed(992459, "a follower whose watch broke and came back ingested only the newest object: it missed the holder's renewals and took the lock object re-created without a record one lease after an older renewal, while the holder worked"),
		withPriority(drawnSeed(5157, "a holder lost its term to API errors and, once they ended, took its own ConfigMap record back with its wall clock stepped 4s back, into the second of its last renew: writing the same term again left the stored record unchanged, so the follower timed the lease from that old renew and took the lock beside the new term's work; a re-take of a term that ended is now a new term (found once every Run waited for its watch)")),
		drawnSeed(3350534216, "the lock object was deleted and re-created without a record while a holder of a coordinated election worked; the coordinator, which had not looked since it assigned that holder, found the Lease vacant and named another candidate, which had seen the holder's record and started its work at once on the coordinator's record"),
		coordinatorNamesOverWipedHolder(true), coordinatorNamesOverWipedHolder(false),
		drawnSeed(11442632257, "a polling meshd holder's lock object was re-created without a record and taken by client-go's shape, whose takeover is excused; a candidate with StartAtOnceAfterSteal then took the lock from that holder by force and started at once, while the meshd holder, which had not renewed since, still worked: the fence the thief skips would have waited for that work too, so its overlap is the trade of StartAtOnceAfterSteal, which the checker now counts for every work still running when the thief starts, not only work already told to stop"),
		drawnSeed(61700011151, "a holder handed the lock over; in the same instant a candidate with StartAtOnceAfterSteal, starting, took it by force from the named successor and started at once, and the successor, whose watch was broken, then led on the record it had been given and started beside the thief, stopping when it saw the steal: the fence the thief skips would have waited for that work too, so the checker now counts it as the trade of StartAtOnceAfterSteal (a checker gap, found by a fresh range)"),
		drawnSeed(1562958868, "ttl 2 s on a Lease: an istiod-shaped follower, which compares records with their times in whole seconds whatever the lock, timed the lease from the holder's first renew of a second, 0.8 s before the holder's last renew; the holder, paused, ended its term a renew deadline after that last renew and its work still stopped when the follower took the lock, 84 ms before the work's stop budget ended; a holder's deadline now counts from the first renew of a second with a RenewDeadline of 2 s or more, on a Lease as on a ConfigMap, and always ends StopTimeout before the lease from that renew runs out (found by a fresh range)"),
		currentSessionSeed(62100001116, "a session-mode holder whose write fell in the second of its earlier one took its renew deadline back to that earlier write (the whole-second rule of seed 1562958868), behind the session's heartbeat; the heartbeat moved it forward again at once, the holder wrote again, and the two went on at the same instant, a loop that kept simulated time from moving; the deadline now never moves back (found by a fresh range on the first fix of seed 1562958868)"),
		withPriority(currentSessionSeed(9300000331, "a candidate whose preemption was suspended after a steal cycle with one holder key found the lock with another holder it outranked, a cooperative one, once every candidate saw the same default; suspended, it did not even ask, and the outranked holder kept the election until the hold-off ended (2.56 s against a bound of 2.5 s); a suspended candidate now asks a cooperative holder, which hands over only when it agrees, and still never takes the lock by force")),
		withPriority(drawnSeed(9100006552, "a candidate without handover, suspended after a second steal cycle with a remote holder that saw the old default, waited out a hold-off doubled to two leases, though every candidate came to agree soon after it began: it cannot ask, and nothing told it that the other side changed its mind, so a lesser holder kept the election 2.58 s against a bound of 2.5 s; the hold-off is now one lease from the loss, whatever the number of cycles")),
		withPriority(currentSessionSeed(8200000143, "a restarted holder that believed another default took the lock by force and saw the true default 8 ms later; the holder it had taken the lock from, entitled again, asked to take it back only when its overrunning work stopped, 0.8 s later, and counted its suspension from then, so the lesser holder kept the election 2.625 s against a bound of 2.5 s; the hold-off now counts from the loss")),
		currentSessionSeed(400067637, "a follower's watch of Leases broke while a holder crashed, came back under a new session token and took the lock by force; the holder's session Lease was deleted before the watch listed again, so the list never showed that token: the follower counted a session it had never seen as over, took the lock by the record's own lease, which a session holder does not renew, and started beside the holder's work"),
		withPriority(drawnSeed(400026714, "a coordinated election whose coordinator read the new default at once, while every live candidate still saw the old one (one had restarted and missed the change): the coordinator handed the lock to the best candidate by its own view, and the checker, judging by the candidates' view alone, took that holder for a lesser one kept past the bound (a checker gap: in a coordinated election the coordinator must agree too; found by make sim-long)")),
		currentSessionSeed(400012142, "a candidate took the lock by force while its session was not current, so its record named no session to keep it alive, and crashed 22 ms later, before its fence; its restarted process found its own record, did not know it for an earlier process's (only a mark naming another session told that) and started at once, beside the work of the holder it had taken the lock from; every record a process writes naming itself now names the writing process's session (found by make sim-long)"),
		currentSessionSeed(13232249548, "the shape of session seed 400012142 drawn again: a forced steal, a crash 16 ms later, a restart under the same identity that took its own record for its own and started at once (found by a fresh range)"),
		drawnSeed(628705758, "a candidate took the lock by force, its work fenced, and its watch broke; while it was broken the lock object was re-created without a record and a holder of client-go's shape took it; the watch came back with a list older than that write, which counts as healthy, and at its fence the candidate trusted the watch, which had not yet handed it the new holder, and started beside that holder's work; a fenced holder now trusts only a watch that has not broken since its last write, and renews first otherwise (found by make test's fresh seeds)"),
		currentSessionSeed(400075503, "a candidate took the lock by force from a holder renewing through its session and fenced its start at RenewDeadline after the steal; the holder's lagging watch showed the steal 1.34 s later, and its work, stopping within its budget, still ran when the thief started; the fence is now a lease after the steal, as the work of a lost term has until the lease ends to stop (found by a fresh range)"),
		currentSessionSeed(900173134, "a candidate took the lock by force, its work fenced, and its watch began to lag by 0.78 s; the lock object was re-created without a record and a holder of client-go's shape took it 0.37 s before the fence; the lagging watch, healthy all along, had not yet handed that write over, and at its fence the candidate trusted it and started beside that holder's work; a fenced holder now always renews, with a write, before its work starts (found by make sim-long)"),
		withPriority(currentSessionSeed(900219294, "a holder accepted a request and, fenced, waited to hand over; a candidate that joined took the accepted request, whose time the annotation keeps in whole seconds, for stale by its own clock 2.001 s after that second began (lease 2 s), and wrote its own over it; the holder released instead of naming anyone and took the lock back at once (found by make sim-long; fixed with seeds 900017746 and 900066923)")),
		withPriority(drawnSeed(400269823, "a polling holder answered a handover request on its cached object while another candidate had asked since: the write conflicted, and the conflict failed the renew; every later renew answered on the same stale object until the renew deadline passed, and the entitled candidate waited past the priority bound (8.42 s against 8.4 s); a conflicting answer now reads the lock and renews (found by make sim-long)")),
		currentSessionSeed(400022285, "a follower's watch of Leases ended unnoticed before it had seen a restarted holder's new session; it judged that unknown session over, sent a heartbeat, and when its watch listed again, the list handed it that heartbeat, by the order of names, before the holder's session Lease: it took the echo of a heartbeat sent before the list for proof and the lock 6.25 s into the holder's term, while the holder worked; an echo now counts only for a heartbeat sent after the watch came back (found by a search of session schedules)"),
		withPriority(currentSessionSeed(900017746, "a holder accepted an entitled candidate's request; another entitled candidate, its wall clock 5 s behind with a lease of 2 s, read that request as stale and wrote its own over it; the holder, its work stopped, found the request it had accepted gone, released the lock instead of naming anyone (the new request was stale by its own clock) and, as no candidate here yields after a release, took it back itself in the same instant; the cycle repeated every 0.6 s and the outranked holder kept the election 4.23 s against a bound of 4.2 s; a candidate now defers to an accepted request whatever its own clock says of the request's time (found by a search of session schedules)")),
		withPriority(currentSessionSeed(900066923, "the shape of session seed 900017746 with a wall clock stepped 4 s ahead (a lease of 4 s): that candidate replaced the request the holder had accepted, the holder released the lock and took it back four times, and kept the election 5.04 s against a bound of 5 s (found by a search of session schedules)")),
		withPriority(currentSessionSeed(900073852, "a remote candidate's watch of Leases listed again; the lagging watch opened after the list ended before it delivered anything, and client-go's reflector gave it up and backed off before the next list without telling the error handler, so the watch still counted as healthy with no watch open; the candidate lost the lock to API errors, its write over the version it last saw conflicted with the lesser holder's take, and it waited for the watch to deliver that write, which nothing did: the outranked holder kept the election 4.229 s against a bound of 4.2 s; a watch the reflector gives up (an error event, or an end within a second without an event) now counts as broken from its end until the next list (found by a search of session schedules)")),
		withPriority(currentSessionSeed(2100216617, "an entitled candidate waited on a holder's accepted request; the holder crashed and came back under its own identity, its old session running out 3.4 s later; at that instant the candidate and a lesser one judged the session over and each asked for a heartbeat, which the session sent at the same clock reading and so counted as no echo (a heartbeat sent at the reading of the judgement may predate it): both waited a RetryPeriod for the next regular heartbeat, then raced, and the lesser one won; the entitled one took the lock a RetryPeriod later, and the lesser holder had kept the election 5.4 s against a bound of 5 s; an echo now counts by the order of sends, so the heartbeat asked for at the judgement counts, and each write stores a renew time of its own (found by make sim-long)")),
		currentSessionSeed(2100359956, "a meshd holder took a Lease lock from a holder of client-go's shape and then had its wall clock stepped back 4 s; its renewals wrote renew times it had written 4 s earlier, and the record the client-go follower had seen last came back byte for byte (a follower of that shape compares the record's bytes, times in whole seconds); the follower saw no change, timed the lease from that old sight and took the lock while the meshd holder still worked; a renewal now stores the last renew time plus the time passed by the monotonic clock when the wall clock stepped back, and the simulation gives each actor a clock with a wall reading apart from its monotonic one, so that the elector sees the step as a real process does (found by make sim-long)"),
		currentSessionSeed(2400007464, "a follower's wall clock stepped 1 s ahead between two heartbeats of the holder's session, a second apart; the simulation shifted the second heartbeat's renew time back by the step onto the first one's, so the follower saw no renewal and judged the session over a second early; with echoes counted by the order of sends it took the lock while the holder's work still ran (a model fault: a real process reads stored times as they are, two that differ differ for it too; an actor now sees a version by the offset of the one before it when its current offset would reverse their order; found by a fresh range)"),
		currentSessionSeed(1900086734, "the only live candidate's run functions failed; it released the lock, the other took it and crashed 0.4 s later, and the candidate, backing off after its failure with no watch subscribed, first saw that holder's record when it contended again, 1 s after it was written, and timed the lease from then; the election was without a leader 2.55 s after the last fault against a bound of 2.5 s, while for most of that time no live candidate could have kept a term (a checker gap: the leaderless bound now counts only while a live candidate is fit to lead; found by make sim-long)"),
		drawnSeed(2800008071, "a candidate took the lock by force from the first holder, fenced, and a better one took it from that candidate, fenced again; the world re-created the lock object without a record and a holder of client-go's shape took the empty object at once, while the first holder's work was still stopping under the two fences; client-go's shape cannot be kept from an empty object, so the overlap is excused, as it was for the holder one take back (a checker gap: the excuse now follows the whole chain of takes; found by make sim-long)"),
		drawnSeed(2800187533, "the world re-created the lock object without a record while meshd-1 held it, paused; a holder of client-go's shape took the empty object (excused) and the world re-created it again, destroying that record; meshd-1, back from its pause, wrote its record into the empty object as the holder it believed it was, stopped 0.2 s later and released, and the follower, which had kept istiod's lease through both re-creations, took the released lock at once beside istiod's work; a record of a third holder found in an emptied object now keeps the lease the follower saw running as the fence of its next term, whatever frees the lock (found by make sim-long)"),
		drawnSeed(3200001458, "a coordinated holder that had written its record into an emptied lock object waited out the lease after that write before naming its successor, as a fenced holder does, and then named it with a brief lease; the successor, paused past that lease, came back and started on the named record, and the coordinator, seeing the brief lease run out, gave the lock to another candidate, which started beside it (found by a fresh range on a first fix of seed 2800187533 that made such a holder wait; that half was taken back)"),
		drawnSeed(5400594594, "a holder whose wall clock was 3 s ahead (lease 2 s) accepted a request it met after a write of its own and handed the lock over; its successor renewed the record with renew times from its own clock, 3 s behind, and 3 s later wrote the very bytes of the record that named it (whole seconds); the old holder, paused meanwhile, saw no change since its own write and took the lock while the successor worked; a term begun on another process's record now renews above that record's renew time (found by make sim-long)"),
		drawnSeed(5400266087, "two polling per-revision candidates: the holder lost the lock to API errors and the world re-created the lock object without a record; the other candidate waited a lease from first seeing it empty and took it; the world re-created it empty again 0.4 s later, and the first candidate, which had seen the first empty object and never the record written into it, counted its lease from that first sight and took the new empty object at once, beside the working holder; an emptied object created since (a new uid, or an object where there was none) now starts the count afresh (found by make sim-long)"),
		withPriority(currentSessionSeed(2800519349, "at ttl 2 s a holder accepted a candidate's request and stopped; before the handover a non-cooperative candidate took the lock by force, and 0.6 s later the candidate it had accepted took it by force in turn, fenced for a lease; the best candidate asked that fenced holder and was accepted, but a holder that took the lock by force named its successor only at its fence, and the outranked holders kept the election 2.607 s against a bound of 2.5 s; a fenced holder now names at once a candidate whose request says it honours fences, with the time left to its fence in the answer, which the record naming the candidate carries on, and the candidate's work starts no earlier than that after it sees the record (found by make sim-long)")),
		withPriority(currentSessionSeed(5100000407, "a remote canary's wall clock was stepped 6 s ahead, more than the lease of 4 s, and stayed there; once every candidate saw the canary as the default, the holder cleared the remote canary's request as stale by its own wall clock, and the remote canary took the lock by force after the grace; the local canary, the best, asked it in turn, was cleared the same way and took the lock by force after the grace too, and the outranked holders kept the election 5.12 s against a bound of 5 s; a holder now knows a request it meets after its own write of the lock, which did not carry it, for one written since that write, fresh for a lease by its own clock whatever the request time says (found by a fresh range)")),
		currentSessionSeed(16200032913, "the lock object was deleted and created again without a record while held; every candidate waited a lease from its first sight of the emptied object, but at each later look the lock still reported the object as replaced (it had seen no version since), so each restarted the count and none took the lock for 6 s; the count now restarts only for another uid than at the last look (found by make sim-long)"),
		withPriority(currentSessionSeed(16200042637, "the best candidate's request to an outranked holder met an injected conflict with no write behind it; a watching candidate waits for the watch to deliver the version it conflicted with, none came, and it asked again only when the holder's lease ran out by its observation, 4 s later, so the outranked holder kept the lock 5.125 s against a bound of 5 s; after such a conflict the candidate now tries again a RetryPeriod on (found by make sim-long)")),
		currentSessionSeed(16300180079, "three candidates that start at once after a steal (client-go's shape); one decided to take the lock from a remote stable holder while it still saw the canary as the default, was paused before its write landed, and the write landed 1.9 s later, after it had seen the default flip back to stable: it started at once beside the work of the holder that outranked it again; a candidate now starts at once only if its comparison still says it outranks the holder when its write returns (found by make sim-long)"),
		currentSessionSeed(16300223144, "a candidate took the lock by force from istiod (fenced for a lease) and named the next candidate before its fence, carrying the time left; that candidate stopped before it had acted on the record, found itself named when it took its request back, and released the lock, which a third candidate took and started beside istiod's work; a candidate named with a fence that has not passed now leaves the lock to expire (found by make sim-long)"),
		currentSessionSeed(7086275623, "a candidate took the lock by force from istiod (fenced until istiod's lease ran out) and, before that fence, named the next candidate, carrying the time left in the annotation; that candidate's watch was broken, and before it saw the record naming it a third candidate wrote a handover request addressed to it, which replaced the annotation and dropped the fence; the named candidate then started at once, beside istiod's work; a request or withdrawal written by another candidate now keeps the fence the annotation carries to the named holder (found by a fresh range)"),
		withPriority(drawnSeed(1100118797, "the best candidate's run functions failed for 3 s; it released the lock, backed off, and meanwhile two lesser candidates took the lock by force in turn, each fenced a lease; when its run functions worked again it asked, and the fenced holder accepted but could hand over only at its fence, 3.6 s later; the checker counted the stretch from the release, while the candidate could not have kept the election (a checker gap: a candidate whose run functions fail, or that backs off after they did, now outranks nobody, and the bound counts from when it is fit again; found by make sim-long)")),
	}, append(faultScenarios(), podScenarios()...)...)
}

// classicSeed names a random schedule of Generate that once broke an
// invariant, so that it runs with the named cases whatever the budget.
func classicSeed(seed int64, why string) Scenario {
	s := generateClassic(seed, false)
	s.Name = fmt.Sprintf("seed-%d", seed)
	return Scenario{Name: s.Name, Case: why, Schedule: s}
}

func base(name, kind string, d time.Duration) Schedule {
	return Schedule{
		Name: name, Seed: 1, Namespace: Namespace, LockName: LockName, LockKind: kind,
		Timing: DefaultTiming(), Duration: d, TransitionSlack: TransitionSlack,
	}
}

// meshd is a watching, cooperative candidate believing view is the default.
func meshd(name, key, view string, startAt time.Duration) CandidateSpec {
	c := CandidateSpec{Name: name, Revision: key, View: view, Watch: true, Cooperative: true, StartAt: startAt}
	if len(key) > 0 && key[0] == '^' {
		c.Revision, c.Remote = key[1:], true
	}
	return c
}

// at is an action at a point of the schedule.
func at(d time.Duration, name string, do func(w *World)) Action {
	return Action{At: d, Name: name, Do: do}
}

func sees(d time.Duration, name, def string) Action {
	return at(d, name+" sees default "+def, func(w *World) { w.SetView(name, def) })
}

// Case 1: two candidates that disagree about the default revision for good
// must not steal the lock back and forth.
func stealStorm(handover bool) Scenario {
	name := "steal-storm-on-disagreement"
	if handover {
		name += "-with-handover"
	}
	s := base(name, resourcelock.ConfigMapsResourceLock, 10*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "canary", "canary", 100*time.Millisecond)
	a.Cooperative, b.Cooperative = handover, handover
	s.Candidates = []CandidateSpec{a, b}
	return Scenario{Name: name, Case: "1: steal storm when candidates disagree about the default", Schedule: s}
}

// Case 2: the candidate sees the new default 50ms before the holder, which
// refuses its request; the candidate must ask again rather than take the
// lock by force once the grace is over.
func refusedRequestAskedAgain() Scenario {
	s := base("refused-request-asked-again", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	h := meshd("holder", "stable", "stable", 0)
	h.Work.Drain = 300 * time.Millisecond
	s.Candidates = []CandidateSpec{h, meshd("cand", "canary", "stable", 200*time.Millisecond)}
	s.Actions = []Action{sees(2*time.Second, "cand", "canary"), sees(2050*time.Millisecond, "holder", "canary")}
	s.Checks = []func(*World){workedAfter("cand", 2*time.Second)}
	return Scenario{Name: s.Name, Case: "2: a refused or abandoned handover request is never asked again", Schedule: s}
}

// Case 3: a polling holder sees the request only at its next renew; the
// candidate must not take the lock while the holder's work still stops.
// Timing: the defaults of package election (ttl 30s).
func graceFromRequestWithPollingHolder() Scenario {
	s := base("grace-counted-from-request-polling-holder", resourcelock.ConfigMapsResourceLock, 60*time.Second)
	s.Timing = Timing{LeaseDuration: 30 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 7500 * time.Millisecond,
		StopTimeout: 5 * time.Second, HandoverGrace: 10 * time.Second}
	s.InvalidConfigOK = true
	h := meshd("holder", "stable", "stable", 0)
	h.Watch = false
	h.Work.Drain = 4900 * time.Millisecond
	s.Candidates = []CandidateSpec{h, meshd("cand", "canary", "stable", time.Second)}
	s.Actions = []Action{sees(15100*time.Millisecond, "holder", "canary"), sees(15100*time.Millisecond, "cand", "canary")}
	s.Checks = []func(*World){workedAfter("cand", 15*time.Second)}
	return Scenario{Name: s.Name, Case: "3: handover grace counted from the request write", Schedule: s}
}

// Case 4: at a small ttl, a holder shutting down must keep its lease while
// its work stops, even when the work outlives the stop timeout.
func workOutlivesStopTimeout() Scenario {
	s := base("work-outlives-stop-timeout-small-ttl", resourcelock.ConfigMapsResourceLock, 10*time.Second)
	s.Timing = Timing{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 500 * time.Millisecond,
		StopTimeout: time.Second, HandoverGrace: 1200 * time.Millisecond}
	a := meshd("a", "stable", "stable", 0)
	a.Work.Drain = 3 * time.Second
	s.Candidates = []CandidateSpec{a, meshd("b", "stable", "stable", 100*time.Millisecond)}
	s.Actions = []Action{at(2*time.Second, "shut a down", func(w *World) { w.mustFind("a").stop() })}
	s.Checks = []func(*World){workedAfter("b", 2*time.Second)}
	return Scenario{Name: s.Name, Case: "4: waiting for the work to stop lets the lease run out", Schedule: s}
}

// Case 4 with the numbers of the report: ttl 2s and the default stop
// timeout of 5s; a stricter validation may refuse this configuration.
func smallTTLDefaultStopTimeout() Scenario {
	sc := workOutlivesStopTimeout()
	sc.Name = "small-ttl-default-stop-timeout"
	sc.Schedule.Name = sc.Name
	sc.Schedule.Timing.StopTimeout = 5 * time.Second
	sc.Schedule.InvalidConfigOK = true
	return sc
}

// Case 5: the candidate handed the lock fails its first write after the
// holder's answer; it must try again after a retry period, not wait out a
// whole lease. The failure is injected into the candidate's first write
// after the holder answered (named it in the record or in the handover
// annotation), whatever that write is in the protocol. The holder's work
// takes 1.5s to stop, so that the record naming the candidate comes more
// than half a renew deadline after its request: the candidate then writes
// its own record before its work starts (one that comes sooner is led on
// as it is, with no write to fail).
func handedOverCandidateRetries() Scenario {
	s := base("handed-over-candidate-retries-failed-write", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	s.Timing.StopTimeout = 2 * time.Second
	holder := meshd("holder", "stable", "stable", 0)
	holder.Work.Drain = 1500 * time.Millisecond
	s.Candidates = []CandidateSpec{holder, meshd("cand", "canary", "stable", 200*time.Millisecond)}
	s.Actions = []Action{sees(2*time.Second, "holder", "canary"), sees(2*time.Second, "cand", "canary")}
	answered := false
	s.OnRecord = func(w *World, r Record) {
		if !answered && r.Writer == "holder" && (r.Holder == "cand" || r.Handover.Candidate == "cand") {
			answered = true
			w.state("cand").addFailures(1)
		}
	}
	s.Checks = []func(*World){func(w *World) {
		failed := w.state("cand").injectedAt()
		if !answered || failed.IsZero() {
			w.Violate("handover", "the holder never answered cand's request (answered %v), or cand never wrote after it", answered)
			return
		}
		from := failed.Sub(epoch)
		limit := from + time.Duration((1+elector.JitterFactor)*float64(s.Timing.RetryPeriod)) + 100*time.Millisecond
		workedBy(w, "cand", from, limit)
	}}
	return Scenario{Name: s.Name, Case: "5: a handed-over candidate waits a whole lease after one failed write", Schedule: s}
}

// Case 6: deleting and re-creating the lock object without a record is not
// a release while the holder's lease runs.
func recreateIsNotRelease(kind string) Scenario {
	s := base("delete-recreate-is-not-release-"+kind, kind, 12*time.Second)
	h := meshd("holder", "stable", "stable", 0)
	h.Work.Drain = 200 * time.Millisecond
	s.Candidates = []CandidateSpec{h, meshd("follower", "stable", "stable", 100*time.Millisecond)}
	s.Actions = []Action{at(3*time.Second, "delete and re-create the lock", func(w *World) { w.Recreate() })}
	return Scenario{Name: s.Name, Case: "6: delete and re-create without a record counted as a release", Schedule: s}
}

// Case 7: a restarted holder finds a handover request from 2020 naming a
// candidate that no longer exists; it must not hand the lock to it.
func ancientRequestForGhost() Scenario {
	s := base("ancient-request-for-a-ghost", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	s.Candidates = []CandidateSpec{meshd("holder", "^stable", "stable", 0), meshd("follower", "^stable", "stable", 100*time.Millisecond)}
	s.Setup = func(w *World) error {
		now := metav1.NewTime(epoch)
		rec := resourcelock.Record{HolderIdentity: "holder", HolderKey: "^stable", LeaseDurationSeconds: 4,
			AcquireTime: now, RenewTime: now, LeaderTransitions: 5}
		old := metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))
		h := `{"holder":"holder","candidate":"ghost","candidateKey":"stable","requestTime":"` + old.UTC().Format(time.RFC3339) + `"}`
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace, Annotations: map[string]string{
			resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(rec)),
			lockmeta.HandoverAnnotationKey:   h,
		}}}
		return w.api.putLock(resourcelock.ConfigMapsResourceLock, cm, false)
	}
	s.Checks = []func(*World){func(w *World) {
		for _, r := range w.Records() {
			if r.Holder == "ghost" {
				w.Violate("ghost", "at %v the lock was handed to ghost, whose request dates from 2020", r.At)
				return
			}
		}
	}}
	return Scenario{Name: s.Name, Case: "7: an arbitrarily old handover request is honoured", Schedule: s}
}

// Case 8: a meshd candidate of the default revision takes the lock from a
// holder of client-go's shape, which goes on working until its own renew
// deadline; the candidate's work must not start before that.
func forcedStealFromIstiod() Scenario {
	s := base("forced-steal-from-istiod", resourcelock.LeasesResourceLock, 12*time.Second)
	s.Istiods = []IstiodSpec{{Name: "istiod-1", Key: "canary"}}
	s.Candidates = []CandidateSpec{meshd("meshd", "stable", "stable", 3*time.Second)}
	s.Checks = []func(*World){workedAfter("meshd", 3*time.Second)}
	return Scenario{Name: s.Name, Case: "8: stealing from a non-cooperating holder overlaps", Schedule: s}
}

// Case 8, the same with a meshd holder that hangs: its API calls block and
// its watch reports nothing; it stops its work at its renew deadline.
func forcedStealFromHungHolder() Scenario {
	s := base("forced-steal-from-hung-holder", resourcelock.ConfigMapsResourceLock, 16*time.Second)
	s.Timing = Timing{LeaseDuration: 8 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 2 * time.Second,
		StopTimeout: time.Second, HandoverGrace: 2500 * time.Millisecond}
	s.InvalidConfigOK = true
	// The holder renews at 2s, then hangs; its work ends at its renew
	// deadline, 6s. The candidate asks at 2.6s and gives up waiting at 5.1s.
	s.Candidates = []CandidateSpec{meshd("holder", "canary", "stable", 0), meshd("cand", "stable", "stable", 2600*time.Millisecond)}
	s.Actions = []Action{at(2500*time.Millisecond, "the holder hangs", func(w *World) {
		w.Fault("hang of holder", 10*time.Second, func(w *World) {
			w.state("holder").pause()
			w.state("holder").setLag(time.Hour)
		}, func(w *World) {
			w.state("holder").setLag(0)
			w.state("holder").unpause()
		})
	})}
	s.Checks = []func(*World){workedAfter("cand", 2600*time.Millisecond)}
	return Scenario{Name: s.Name, Case: "8: stealing from a hung meshd holder overlaps", Schedule: s}
}

// Also seen: a run function that ignores its context must not let a
// successor start beside it, and once it outlives the stop timeout its
// process must fail its health check (elector Check, behind /healthz), so
// that Kubernetes restarts it.
func runFunctionIgnoresContext() Scenario {
	s := base("run-function-ignores-context", resourcelock.ConfigMapsResourceLock, 14*time.Second)
	h := meshd("holder", "stable", "stable", 0)
	h.Work.IgnoreContext = true
	s.Candidates = []CandidateSpec{h, meshd("cand", "canary", "stable", 200*time.Millisecond)}
	s.Actions = []Action{
		sees(2*time.Second, "holder", "canary"), sees(2*time.Second, "cand", "canary"),
		at(2*time.Second+s.Timing.StopTimeout+time.Second, "health check of the holder", func(w *World) {
			if err := w.mustFind("holder").le.Check(time.Second); err == nil {
				w.Violate("healthz", "the holder's run function has ignored its context for over %v, yet Check reports it healthy",
					s.Timing.StopTimeout)
			}
		}),
		at(10*time.Second, "release the hung run function", func(w *World) { w.ReleaseHung("holder") }),
	}
	s.Checks = []func(*World){workingAtEnd("cand")}
	return Scenario{Name: s.Name, Case: "also seen: a run function ignoring its context", Schedule: s}
}

// Also seen: a panicking run function must end the term, not the process.
func panickingRunFunction() Scenario {
	s := base("panicking-run-function", resourcelock.ConfigMapsResourceLock, 10*time.Second)
	h := meshd("holder", "stable", "stable", 0)
	h.Work = WorkSpec{FailAfter: time.Second, Panic: true}
	s.Candidates = []CandidateSpec{h, meshd("follower", "stable", "stable", 100*time.Millisecond)}
	s.Actions = []Action{at(1500*time.Millisecond, "later terms do not panic", func(w *World) { w.SetWork("holder", WorkSpec{}) })}
	s.Checks = []func(*World){func(w *World) {
		for _, iv := range w.Work() {
			// A follower may take the released lock at the instant of
			// the panic; the holder's own term started at 0.
			if iv.Start >= time.Second {
				return
			}
		}
		w.Violate("liveness", "no work started again after the run function panicked at 1s")
	}}
	return Scenario{Name: s.Name, Case: "also seen: a panicking run function crashes the process", Schedule: s, Subprocess: true}
}

// Also seen: writes to the lock object that leave the record alone (a
// label, a foreign annotation) must not keep a dead holder's lease alive.
func foreignWritesKeepDeadHolder() Scenario {
	s := base("foreign-writes-keep-dead-holder-alive", resourcelock.ConfigMapsResourceLock, 16*time.Second)
	s.Candidates = []CandidateSpec{meshd("holder", "stable", "stable", 0), meshd("follower", "stable", "stable", 100*time.Millisecond)}
	s.Actions = []Action{at(2*time.Second, "the holder crashes", func(w *World) { w.mustFind("holder").crash(); w.noteFault() })}
	for t := 2500 * time.Millisecond; t < 15*time.Second; t += 700 * time.Millisecond {
		label := (t/(700*time.Millisecond))%2 == 0
		s.Actions = append(s.Actions, at(t, "foreign write", func(w *World) { w.ForeignWrite(label) }))
	}
	s.Checks = []func(*World){workedAfter("follower", 2*time.Second)}
	return Scenario{Name: s.Name, Case: "also seen: foreign writes refresh a dead holder's lease", Schedule: s}
}

// Found by the simulation (seed 41): a candidate that took the lock by
// force from a holder of client-go's shape waits for its fence before its
// work starts; asked for the lock meanwhile by a candidate that outranks
// it, it must not hand over before the fence, or its successor starts
// beside the old holder's work.
func fencedHolderHandsOverAtFence() Scenario {
	s := base("fenced-holder-hands-over-at-fence", resourcelock.LeasesResourceLock, 14*time.Second)
	s.Istiods = []IstiodSpec{{Name: "istiod-1", Key: "canary"}}
	// remote steals from istiod-1 at 3s and waits for its fence; local, of
	// the same revision, outranks remote and asks it for the lock at 3.2s.
	s.Candidates = []CandidateSpec{meshd("remote", "^stable", "stable", 3*time.Second),
		meshd("local", "stable", "stable", 3200*time.Millisecond)}
	s.Checks = []func(*World){workedAfter("local", 3*time.Second)}
	return Scenario{Name: s.Name, Case: "sim seed 41: a fenced holder hands over before its fence", Schedule: s}
}

// Found by the simulation (seeds 87, 145): the write of a forced steal
// happens but its reply is lost (a timeout). The record names the thief,
// which learns it at its next attempt and must then still wait for the
// fence of the steal instead of starting as if the lock had been handed
// to it. The holder polls, so it learns of the steal only at its next
// renew, and its work takes most of the stop timeout to stop.
func ambiguousStealKeepsFence() Scenario {
	s := base("ambiguous-steal-keeps-fence", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	h := meshd("holder", "canary", "stable", 0)
	h.Watch = false
	h.Work.Drain = 900 * time.Millisecond
	thief := meshd("thief", "stable", "stable", 2050*time.Millisecond)
	thief.Cooperative = false
	s.Candidates = []CandidateSpec{h, thief}
	s.Actions = []Action{at(2*time.Second, "the thief's next write loses its reply", func(w *World) {
		w.noteFault()
		w.state("thief").addLostReplies(1)
	})}
	s.Checks = []func(*World){workedAfter("thief", 2*time.Second), func(w *World) {
		if w.state("thief").injectedAt().IsZero() {
			w.Violate("scenario", "the thief's steal never lost its reply")
		}
	}}
	return Scenario{Name: s.Name, Case: "sim seeds 87, 145: a steal whose reply is lost loses its fence", Schedule: s}
}

// Found by the simulation (seed 892): a thief's term ends before its
// fence (its renewals fail until its renew deadline) while the record still
// names it; at its next Run it found its own record and started at once,
// beside the old holder's work, which was still stopping. The old holder
// polls and is paused, so it stops only at its own renew deadline.
func fenceSurvivesLostTerm() Scenario {
	s := base("fence-survives-a-lost-term", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	h := meshd("holder", "canary", "stable", 0)
	h.Watch = false
	h.Work.Drain = 900 * time.Millisecond
	thief := meshd("thief", "stable", "stable", 3050*time.Millisecond)
	thief.Cooperative = false
	s.Candidates = []CandidateSpec{h, thief}
	s.Actions = []Action{
		at(3020*time.Millisecond, "the holder pauses after its renew at 3s", func(w *World) {
			w.Fault("pause of holder", 5*time.Second, func(w *World) { w.state("holder").pause() },
				func(w *World) { w.state("holder").unpause() })
		}),
		at(3100*time.Millisecond, "the thief's API calls fail until after its renew deadline", func(w *World) {
			w.Fault("API errors for thief", 1800*time.Millisecond, func(w *World) { w.state("thief").setMode(errInternal) },
				func(w *World) { w.state("thief").setMode(errNone) })
		}),
	}
	s.Checks = []func(*World){workedAfter("thief", 3*time.Second)}
	return Scenario{Name: s.Name, Case: "sim seed 892: a term lost before its fence forgets the fence", Schedule: s}
}

// Found by the simulation (seeds 213, 382, 892, 968): a run function that
// fails soon after it starts made its candidate release the lock and take
// it again at once, over and over: a storm of transitions. The candidate
// now contends again only after a back-off.
func failingRunFunctionBacksOff() Scenario {
	s := base("failing-run-function-backs-off", resourcelock.LeasesResourceLock, 12*time.Second)
	h := meshd("holder", "stable", "stable", 0)
	h.Work = WorkSpec{FailAfter: 100 * time.Millisecond}
	s.Candidates = []CandidateSpec{h}
	s.Checks = []func(*World){func(w *World) {
		if n := len(w.Work()); n < 3 || n > 6 {
			w.Violate("scenario", "%d terms of work in 12s; with a back-off of 1s, 2s, 4s, 4s... expected 3 to 6", n)
		}
	}}
	return Scenario{Name: s.Name, Case: "sim seeds 213, 382, 892, 968: no back-off after a failed run function", Schedule: s}
}

// Found by the simulation (seeds 621, 752, 1637, 1708, 1923): candidates
// that see a change of the default at different times each outrank the
// holder before them, and each steals at most once per RetryPeriod; but in
// a chain (a takes from the holder, b from a, c from b, d from c) the lock
// moved four times in one instant. Nobody now steals from a term younger
// than a RetryPeriod, as seen by the thief.
func stealChainOnePerRetryPeriod() Scenario {
	s := base("steal-chain-one-per-retry-period", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	nonCoop := func(c CandidateSpec) CandidateSpec { c.Cooperative = false; return c }
	s.Candidates = []CandidateSpec{
		nonCoop(meshd("h", "canary", "canary", 0)),
		nonCoop(meshd("a", "^stable", "canary", 100*time.Millisecond)),
		nonCoop(meshd("b", "stable", "canary", 200*time.Millisecond)),
		nonCoop(meshd("c", "canary", "canary", 300*time.Millisecond)),
		nonCoop(meshd("d", "stable", "canary", 400*time.Millisecond)),
	}
	// a, b and d see the new default; c and h do not (yet).
	s.Actions = []Action{sees(3*time.Second, "a", "stable"), sees(3*time.Second, "b", "stable"), sees(3*time.Second, "d", "stable"),
		sees(9*time.Second, "c", "stable"), sees(9*time.Second, "h", "stable")}
	s.Checks = []func(*World){func(w *World) {
		var last Record
		for i, r := range w.Records() {
			if i > 0 && r.Holder != "" && last.Holder != "" && r.Holder != last.Holder && r.Writer == r.Holder && r.At-last.At < s.Timing.RetryPeriod {
				w.Violate("steal-chain", "%s took the lock from %s at %v, %v after %s's term began", r.Holder, last.Holder, r.At, r.At-last.At, last.Holder)
			}
			if r.Holder != last.Holder {
				last = r
			}
		}
	}}
	return Scenario{Name: s.Name, Case: "sim seeds 621, 752, 1637, 1708, 1923: a chain of steals moves the lock many times at once", Schedule: s}
}

// Found by the simulation (seed 1427): the lock object is re-created
// without a record between two renews of a watching holder, and a
// candidate that never saw the holder's record starts meanwhile; it found
// an empty object and took it. The holder now writes its record again as
// soon as its watch shows the re-created object.
func recreateHolderWritesAtOnce(kind string) Scenario {
	s := base("recreate-holder-writes-at-once-"+kind, kind, 10*time.Second)
	s.Candidates = []CandidateSpec{meshd("holder", "stable", "stable", 0), meshd("newcomer", "stable", "stable", 3600*time.Millisecond)}
	s.Actions = []Action{at(3400*time.Millisecond, "delete and re-create the lock", func(w *World) { w.Recreate() })}
	s.Checks = []func(*World){func(w *World) {
		for _, r := range w.Records() {
			if r.At > 3400*time.Millisecond && r.Holder != "holder" {
				w.Violate("recreate", "at %v the record names %q, not the holder", r.At, r.Holder)
				return
			}
		}
	}, workingAtEnd("holder")}
	return Scenario{Name: s.Name, Case: "sim seed 1427: a holder re-asserts only at its next renew after a re-create", Schedule: s}
}

// Found by the simulation (seeds 1316, 2630, 5617, 6648, 7973, 8786): the
// lock object is re-created without a record while a polling holder works,
// and a candidate that never saw a record starts before the holder's next
// renew; it took the empty object at once. Knowing no holder, it now
// waits a lease from first sight, and the holder writes its record again
// meanwhile.
func recreateNewcomerWaits() Scenario {
	s := base("recreate-newcomer-waits-a-lease", resourcelock.ConfigMapsResourceLock, 10*time.Second)
	h := meshd("holder", "stable", "stable", 0)
	h.Watch = false
	s.Candidates = []CandidateSpec{h, meshd("newcomer", "stable", "stable", 3500*time.Millisecond)}
	s.Actions = []Action{at(3400*time.Millisecond, "delete and re-create the lock", func(w *World) { w.Recreate() })}
	s.Checks = []func(*World){workingAtEnd("holder"), func(w *World) {
		for _, r := range w.Records() {
			if r.Holder == "newcomer" {
				w.Violate("recreate", "at %v the newcomer took the lock from its working holder", r.At)
				return
			}
		}
	}}
	return Scenario{Name: s.Name, Case: "sim seeds 1316, 2630, 5617: a newcomer takes a re-created lock from a polling holder", Schedule: s}
}

// Found by the reference run under benign faults (seed 239): a follower's
// read blocked (the process paused) while a new holder took the lock, and
// the record it returned was stamped with the time the read was sent. The
// new holder's lease thus started, in the follower's eyes, before it was
// written; when the new holder could no longer renew, the follower took
// the lock while its work was still stopping.
func slowReadObservedOnReturn() Scenario {
	s := base("slow-read-observed-on-return", resourcelock.ConfigMapsResourceLock, 14*time.Second)
	old, next := meshd("old", "stable", "stable", 0), meshd("new", "stable", "stable", 100*time.Millisecond)
	next.Work.Drain = 900 * time.Millisecond
	slow := meshd("slow", "stable", "stable", 4200*time.Millisecond)
	slow.Watch = false
	s.Candidates = []CandidateSpec{old, next, slow}
	s.Actions = []Action{
		at(2050*time.Millisecond, "old crashes", func(w *World) { w.mustFind("old").crash(); w.noteFault() }),
		at(4190*time.Millisecond, "pause slow", func(w *World) {
			w.Fault("pause of slow", 1960*time.Millisecond, func(w *World) { w.state("slow").pause() },
				func(w *World) { w.state("slow").unpause() })
		}),
		at(6300*time.Millisecond, "new is cut off", func(w *World) {
			w.Fault("API errors for new", 6*time.Second, func(w *World) { w.state("new").setMode(errInternal) },
				func(w *World) { w.state("new").setMode(errNone) })
		}),
	}
	s.Checks = []func(*World){workedAfter("new", 6*time.Second), workedAfter("slow", 8*time.Second)}
	return Scenario{Name: s.Name, Case: "benign seed 239: a slow read stamps the record with the time it was sent", Schedule: s}
}

// workedAfter checks that name's work started after from at some point.
func workedAfter(name string, from time.Duration) func(*World) {
	return func(w *World) {
		for _, iv := range w.Work() {
			if iv.Actor == name && iv.Start >= from {
				return
			}
		}
		w.Violate("liveness", "%s never worked after %v", name, from)
	}
}

// workingAtEnd checks that name's work runs when the schedule ends.
func workingAtEnd(name string) func(*World) {
	return func(w *World) {
		for _, iv := range w.Work() {
			if iv.Actor == name && iv.End < 0 {
				return
			}
		}
		w.Violate("liveness", "%s does not work when the schedule ends", name)
	}
}

// workedBy checks that name's work started in [from, limit] after a write
// failed at from.
func workedBy(w *World, name string, from, limit time.Duration) {
	for _, iv := range w.Work() {
		if iv.Actor == name && iv.Start >= from {
			if iv.Start > limit {
				w.Violate("handover", "%s failed a write at %v but started work only at %v (limit %v)",
					name, from, iv.Start, limit)
			}
			return
		}
	}
	w.Violate("handover", "%s failed a write at %v and never started work", name, from)
}

// sessionSeed is classicSeed for a schedule of GenerateSessions.
func sessionSeed(seed int64, why string) Scenario {
	s := generateSessions(seed, false)
	s.Name = fmt.Sprintf("session-seed-%d", seed)
	return Scenario{Name: s.Name, Case: why, Schedule: s}
}

// sessionSeed3349 is session seed 3349 as GenerateSessions drew it before
// the combinations (with the faults of extraFault): the entitled candidate
// lost its lease to API errors, subscribed anew while its informer backed
// off with no watch open, took the cached object it was handed for a sign
// of a working watch, and after each conflicting write waited for a
// delivery that could not come: the lesser holder kept the election 4.6s
// after the errors ended (found by the priority invariant).
func sessionSeed3349() Scenario {
	s := generateSessions(3349, true)
	s.Name = "session-seed-3349"
	return Scenario{Name: s.Name, Case: "a delivery is no sign of a working watch", Schedule: s}
}

// drawnSessionSeed is sessionSeed for a schedule drawn with everything
// GenerateSessions drew before Pods were simulated, the configuration
// included.
func drawnSessionSeed(seed int64, why string) Scenario {
	g := newSessions(seed, true)
	list := withoutPods(combinationsOf(true))
	g.configure(turnOf(seed, list), list, false)
	s := *g.s
	s.Name = fmt.Sprintf("session-seed-%d", seed)
	return Scenario{Name: s.Name, Case: why, Schedule: s}
}

// drawnSeed is classicSeed for a schedule drawn with everything Generate
// draws, Pods included; draws added later must come after them.
func drawnSeed(seed int64, why string) Scenario {
	s := Generate(seed)
	s.Name = fmt.Sprintf("seed-%d", seed)
	return Scenario{Name: s.Name, Case: why, Schedule: s}
}

// currentSessionSeed names a schedule of GenerateSessions as it draws
// today (every accepted combination, Pods).
func currentSessionSeed(seed int64, why string) Scenario {
	s := GenerateSessions(seed)
	s.Name = fmt.Sprintf("session-seed-%d", seed)
	return Scenario{Name: s.Name, Case: why, Schedule: s}
}

// withPriority turns the priority invariant on for sc.
func withPriority(sc Scenario) Scenario {
	sc.Schedule.CheckPriority = true
	return sc
}

// wipedLockTakenWhenItsWaitEnds: the holder crashes, and while its lease
// still runs the lock object is re-created without a record, which counts
// as held for a lease from then. The watching follower finds the holder's
// lease over first and the object still held; it must wake when the
// object's wait ends, not a jittered retry period after its failed attempt
// (bug 21; session seed 200031713 was without a leader 5.016 s after such
// a re-creation, against LeaseDuration + RetryPeriod).
func wipedLockTakenWhenItsWaitEnds() Scenario {
	const wipe = 4500 * time.Millisecond
	s := base("wiped-lock-taken-when-its-wait-ends", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	s.Candidates = []CandidateSpec{meshd("old", "stable", "stable", 0), meshd("next", "stable", "stable", 100*time.Millisecond)}
	s.Actions = []Action{
		at(2*time.Second, "old crashes", func(w *World) { w.mustFind("old").crash(); w.noteFault() }),
		at(wipe, "delete and re-create the lock", func(w *World) { w.Recreate() }),
	}
	s.Checks = []func(*World){func(w *World) {
		due := wipe + s.Timing.LeaseDuration
		for _, iv := range w.Work() {
			if iv.Actor == "next" {
				if iv.Start < due || iv.Start > due+10*time.Millisecond { // the elector's expiry slack is 1 ms
					w.Violate("liveness", "next started at %v; the re-created lock may be taken at %v", iv.Start, due)
				}
				return
			}
		}
		w.Violate("liveness", "next never worked")
	}}
	return Scenario{Name: s.Name, Case: "a watching follower slept a retry period past the end of a wiped lock's wait", Schedule: s}
}

// coordinatorNamesOverWipedHolder: in a coordinated election "b" holds the
// lock and works, and "a", which the coordinator ranks first but which
// may not take the lock from a holder of its own revision and location,
// follows (watching, or polling). The lock object is deleted and
// re-created without a record while the coordinator fails over: the new
// coordinator has not seen b's record, finds the Lease vacant and names a.
// That record is not b's handover, and b works until it sees it; a must
// start its work only once b's lease, as a last saw it renewed, has run
// out. Before, a started at once on the coordinator's record, beside b.
func coordinatorNamesOverWipedHolder(watch bool) Scenario {
	const wipe = 2500 * time.Millisecond
	name := "coordinator-names-over-wiped-holder-"
	if watch {
		name += "watching"
	} else {
		name += "polling"
	}
	s := base(name, resourcelock.LeasesResourceLock, 12*time.Second)
	s.Mode, s.Truth = ModeCoordinated, "stable"
	b, a := meshd("b", "stable", "stable", 0), meshd("a", "stable", "stable", 500*time.Millisecond)
	b.Cooperative, a.Cooperative = false, false
	b.Work.Drain = time.Second // b's work takes a while to stop once b sees a named
	a.Watch = watch
	s.Candidates = []CandidateSpec{b, a}
	s.Actions = []Action{
		at(wipe, "the coordinator fails over as the lock is deleted and re-created without a record", func(w *World) {
			w.CoordinatorFailsOver()
			w.Recreate()
		}),
	}
	s.Checks = []func(*World){func(w *World) {
		var named time.Duration = -1
		for _, r := range w.Records() {
			if r.At >= wipe && r.Holder == "a" {
				named = r.At
				break
			}
		}
		if named < 0 {
			w.Violate("scenario", "the new coordinator never named a after the re-creation")
			return
		}
		for _, iv := range w.Work() {
			if iv.Actor == "a" && iv.Start >= wipe {
				return
			}
		}
		w.Violate("liveness", "a, named at %v, never worked", named)
	}}
	return Scenario{Name: name, Case: "a coordinator that has not seen the holder names another candidate on a lock object re-created without a record", Schedule: s}
}
