package sim

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func newTestAPI() (*apiServer, *actorState, *actorClient) {
	clk := newSimClock(epoch)
	api := newAPIServer(clk, Namespace)
	st := newActorState("a", clk)
	return api, st, newActorClient(api, st)
}

func TestAPIRefusesStaleUpdates(t *testing.T) {
	api, _, c := newTestAPI()
	ctx := context.Background()
	cms := c.CoreV1().ConfigMaps(Namespace)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := cm.DeepCopy()
	cm.Data = map[string]string{"k": "v"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Update(ctx, first, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update of a stale version: err = %v, want a conflict", err)
	}
	if len(api.events) != 2 || api.events[0].typ != watch.Added || api.events[1].typ != watch.Modified {
		t.Fatalf("logged %d events, want ADDED then MODIFIED", len(api.events))
	}
}

func TestFaultsShapeCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, st, c := newTestAPI()
		cms := c.CoreV1().ConfigMaps(Namespace)
		get := func(ctx context.Context) error { _, err := cms.Get(ctx, LockName, metav1.GetOptions{}); return err }

		st.setMode(errInternal)
		if err := get(context.Background()); !apierrors.IsInternalError(err) {
			t.Fatalf("errInternal: err = %v", err)
		}
		st.setMode(errNone)
		if err := get(context.Background()); !apierrors.IsNotFound(err) {
			t.Fatalf("no fault: err = %v, want NotFound", err)
		}

		st.pause()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- get(ctx) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a paused call returned: %v", err)
		default:
		}
		time.Sleep(2 * time.Second)
		if err := <-done; err == nil || !strings.Contains(err.Error(), "paused") {
			t.Fatalf("paused call after its context ended: err = %v", err)
		}
		st.unpause()
		if !st.cutOffSince(epoch.Add(-time.Nanosecond)) {
			t.Fatal("a pause does not count as being cut off from the API")
		}

		st.addLostReplies(1)
		_, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace}}, metav1.CreateOptions{})
		if !apierrors.IsServerTimeout(err) {
			t.Fatalf("lost reply: err = %v, want a server timeout", err)
		}
		if err := get(context.Background()); err != nil {
			t.Fatalf("the write whose reply was lost did not happen: %v", err)
		}
	})
}

func TestWatchLagsAndBreaks(t *testing.T) {
	api, st, c := newTestAPI()
	ctx := context.Background()
	w, err := c.CoreV1().ConfigMaps(Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	st.setLag(time.Second)
	if _, err := c.CoreV1().ConfigMaps(Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	settle := func() {}
	api.deliver(settle)
	if len(w.ResultChan()) != 0 {
		t.Fatal("a lagging watch delivered at once")
	}
	if due, ok := api.nextDelivery(); !ok || !due.Equal(epoch.Add(time.Second)) {
		t.Fatalf("next delivery = %v, %v; want one second later", due, ok)
	}
	api.clock.Step(time.Second)
	api.deliver(settle)
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("event = %v, want ADDED", ev.Type)
	}
	api.breakWatches(st)
	if _, open := <-w.ResultChan(); open {
		t.Fatal("a broken watch stays open")
	}
}

func TestLedgerReportsOverlap(t *testing.T) {
	clk := newSimClock(epoch)
	j := newJournal(clk)
	l := newLedger(j)
	a := l.start("a")
	clk.Step(time.Second)
	l.end(a)
	b := l.start("b") // after a ended: fine
	if v, _ := j.result(); len(v) != 0 {
		t.Fatalf("violations after consecutive work: %v", v)
	}
	clk.Step(time.Second)
	l.start("c")
	v, _ := j.result()
	if len(v) != 1 || v[0].Invariant != "overlap" || !strings.Contains(v[0].Detail, "c started work while b") {
		t.Fatalf("violations = %v, want c overlapping b", v)
	}
	l.end(b)
	if iv := l.intervals(); len(iv) != 3 || iv[0].End != time.Second || iv[2].End >= 0 {
		t.Fatalf("intervals = %+v", iv)
	}
}

func TestTransitionsAreBounded(t *testing.T) {
	clk := newSimClock(epoch)
	j := newJournal(clk)
	tr := &transitions{j: j, retry: time.Second, slack: 2}
	for i, h := range []string{"a", "b", "a", "b"} {
		if i > 0 {
			clk.Step(time.Second)
		}
		tr.observe(h)
		tr.observe(h) // renewals are not transitions
		tr.observe("")
	}
	if v, _ := j.result(); len(v) != 0 {
		t.Fatalf("one change per RetryPeriod was reported: %v", v)
	}
	for _, h := range []string{"a", "b", "a"} {
		clk.Step(10 * time.Millisecond)
		tr.observe(h)
	}
	if v, _ := j.result(); len(v) != 1 || v[0].Invariant != "transitions" {
		t.Fatalf("violations = %v, want one transitions violation", v)
	}
}

func TestOutranksFollowsTheStealRule(t *testing.T) {
	for _, tc := range []struct {
		rev    string
		remote bool
		holder string
		def    string
		want   bool
	}{
		{"stable", false, "canary", "stable", true},
		{"stable", false, "canary", "canary", false},
		{"stable", false, "canary", "", false},
		{"stable", false, "^stable", "", true},
		{"stable", true, "^stable", "stable", false},
		{"stable", true, "stable", "stable", false},
		{"", false, "^default", "", true},
		{"stable", true, "canary", "stable", true},
	} {
		if got := outranks(tc.rev, tc.remote, tc.holder, tc.def); got != tc.want {
			t.Errorf("outranks(%q, remote %v, holder %q, default %q) = %v, want %v", tc.rev, tc.remote, tc.holder, tc.def, got, tc.want)
		}
	}
}

// quiet is a schedule with no fault but a crash: today's elector and any
// correct one pass it, so it shows the harness reports no false alarm.
func quiet(kind string, watchAll bool) Schedule {
	s := base("quiet-"+kind, kind, 20*time.Second)
	for i, name := range []string{"a", "b", "c"} {
		c := meshd(name, "stable", "stable", time.Duration(i)*100*time.Millisecond)
		c.Watch = watchAll || i != 2
		s.Candidates = append(s.Candidates, c)
	}
	s.Actions = []Action{at(5*time.Second, "crash a", func(w *World) { w.mustFind("a").crash() })}
	s.Checks = []func(*World){func(w *World) {
		for _, iv := range w.Work() {
			if iv.Actor != "a" && iv.Start >= 5*time.Second {
				return
			}
		}
		w.Violate("liveness", "nobody worked after a crashed")
	}}
	return s
}

func TestQuietSchedulesPass(t *testing.T) {
	for _, s := range []Schedule{
		quiet(resourcelock.ConfigMapsResourceLock, true), quiet(resourcelock.LeasesResourceLock, false),
	} {
		res := Run(t, s)
		for _, v := range res.Violations {
			t.Errorf("%s: %v", s.Name, v)
		}
		if t.Failed() {
			t.Logf("trace:\n%s", res.Trace)
		}
	}
}

// TestIstiodStopsAtItsRenewDeadline checks the holder of client-go's shape:
// cut off from the API, it works on for RetryPeriod + RenewDeadline after
// its last renew, as client-go's renew loop does, and no longer.
func TestIstiodStopsAtItsRenewDeadline(t *testing.T) {
	s := base("istiod-cut-off", resourcelock.LeasesResourceLock, 12*time.Second)
	s.Istiods = []IstiodSpec{{Name: "istiod-1", Key: "canary"}}
	var cutAt time.Duration
	s.Actions = []Action{at(4500*time.Millisecond, "cut istiod off", func(w *World) {
		cutAt = w.Now()
		w.Fault("errors", 20*time.Second, func(w *World) { w.state("istiod-1").setMode(errInternal) }, func(*World) {})
	})}
	s.Checks = []func(*World){func(w *World) {
		var lastRenew time.Duration
		for _, r := range w.Records() {
			if r.At <= cutAt {
				lastRenew = r.At
			}
		}
		iv := w.Work()
		if len(iv) != 1 || iv[0].End < 0 {
			w.Violate("test", "work = %+v, want one ended term", iv)
			return
		}
		want := lastRenew + s.Timing.RetryPeriod + s.Timing.RenewDeadline
		if iv[0].End != want {
			w.Violate("test", "istiod stopped at %v, want %v (last renew %v + RetryPeriod + RenewDeadline)", iv[0].End, want, lastRenew)
		}
	}}
	res := Run(t, s)
	for _, v := range res.Violations {
		t.Error(v)
	}
	if t.Failed() {
		t.Logf("trace:\n%s", res.Trace)
	}
}

func TestOverlapExcusedOnlyWhenTheLockWasTaken(t *testing.T) {
	s := base("excuse", resourcelock.ConfigMapsResourceLock, time.Second)
	w := newWorld(s)
	told := w.clock.Now()
	w.clock.Step(s.Timing.StopTimeout + time.Millisecond) // overran its budget
	wk := work{actor: "a", since: epoch, cancelled: told}
	w.records = []Record{{Holder: "a", Writer: "a"}, {Holder: "a", Writer: "a"}, {Holder: "b", Writer: "b"}}
	if !w.unavoidable(wk, w.clock.Now()) {
		t.Error("overlap with overrunning work whose lock was taken is not excused")
	}
	w.records = []Record{{Holder: "a", Writer: "a"}, {Holder: "", Writer: "a"}, {Holder: "b", Writer: "b"}}
	if w.unavoidable(wk, w.clock.Now()) {
		t.Error("overlap with work whose holder released the lock is excused")
	}
	w.records = []Record{{Holder: "a", Writer: "a"}, {Holder: "b", Writer: "a"}}
	if w.unavoidable(wk, w.clock.Now()) {
		t.Error("overlap with work whose holder handed the lock over is excused")
	}
	w.records = []Record{{Holder: "a", Writer: "a"}, {Holder: "b", Writer: "b"}}
	if w.unavoidable(work{actor: "a", since: epoch, cancelled: w.clock.Now()}, w.clock.Now()) {
		t.Error("overlap with work told to stop just now is excused")
	}
	if w.unavoidable(work{actor: "a", since: epoch}, w.clock.Now()) {
		t.Error("overlap with work never told to stop is excused")
	}
}

// TestRecreatedRecordIsNoTransition checks how the transition bound counts
// a lock object without a record: written by an actor it is a release, so
// the next holder counts even if it is the same; re-created by the world
// (a fault) it ends no term, so its holder writing its record again does
// not count.
func TestRecreatedRecordIsNoTransition(t *testing.T) {
	w := newWorld(base("recreate-count", resourcelock.ConfigMapsResourceLock, time.Second))
	cm := func(holder string) *corev1.ConfigMap {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace}}
		if holder != "" {
			rec := resourcelock.Record{HolderIdentity: holder, LeaseDurationSeconds: 4}
			obj.Annotations = map[string]string{resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(rec))}
		}
		return obj
	}
	write := func(holder, writer string) {
		w.noteChange(apiEvent{resource: resourcelock.ConfigMapsResourceLock, typ: watch.Modified, obj: cm(holder), writer: writer})
	}
	write("a", "a")
	write("", "") // re-created without a record by the world
	write("a", "a")
	if n := len(w.trans.times); n != 1 {
		t.Fatalf("%d transitions after a re-create and the holder's rewrite, want 1", n)
	}
	write("", "a") // released by its holder
	write("a", "a")
	if n := len(w.trans.times); n != 2 {
		t.Fatalf("%d transitions after a release and a new term of the same holder, want 2", n)
	}
}

// TestOverlapExcusedForIstiodOnlyOnADestroyedRecord checks the one overlap
// excused for a holder of client-go's shape: it took the object the world
// re-created without a record, straight after the re-creation, and the
// work it overlaps is that of the holder whose record was destroyed.
func TestOverlapExcusedForIstiodOnlyOnADestroyedRecord(t *testing.T) {
	s := base("excuse-recreate", resourcelock.ConfigMapsResourceLock, time.Second)
	s.Istiods = []IstiodSpec{{Name: "istiod-1", Key: "canary"}}
	s.Candidates = []CandidateSpec{meshd("a", "stable", "stable", 0), meshd("b", "stable", "stable", 0)}
	w := newWorld(s)
	wk := work{actor: "a", since: epoch}
	held := func(h string) Record { return Record{Holder: h, Writer: h} }
	destroyed := func(h string) []Record {
		return []Record{{Holder: h, Deleted: true}, {}} // deleted, re-created without a record
	}
	join := func(parts ...[]Record) []Record {
		var out []Record
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		records []Record
		starter string
		excused bool
	}{
		{"istiod takes a's destroyed record", join([]Record{held("a")}, destroyed("a"), []Record{held("istiod-1")}), "istiod-1", true},
		{"foreign writes on the empty object", join([]Record{held("a")}, destroyed("a"), []Record{{}, {}, held("istiod-1"), held("istiod-1")}), "istiod-1", true},
		{"a meshd candidate takes it", join([]Record{held("a")}, destroyed("a"), []Record{held("b")}), "b", false},
		{"a released the lock", []Record{held("a"), {Writer: "a"}, held("istiod-1")}, "istiod-1", false},
		{"the destroyed record named another holder", join([]Record{held("b")}, destroyed("b"), []Record{held("istiod-1")}), "istiod-1", false},
		{"someone held it after the re-creation", join([]Record{held("a")}, destroyed("a"), []Record{held("b"), held("istiod-1")}), "istiod-1", false},
		{"istiod took it from a live record", []Record{held("a"), held("istiod-1")}, "istiod-1", false},
		{"a foreign write on the held record, then deletion", join([]Record{held("a"), {Holder: "a"}}, destroyed("a"), []Record{held("istiod-1")}), "istiod-1", true},
		{"b had taken the lock from a, whose work stops", join([]Record{held("a"), held("b")}, destroyed("b"), []Record{held("istiod-1")}), "istiod-1", true},
		{"a had handed the lock to b", join([]Record{held("a"), {Holder: "b", Writer: "a"}}, destroyed("b"), []Record{held("istiod-1")}), "istiod-1", false},
		{"b took the lock from c, which had taken it from a", join([]Record{held("a"), held("c"), held("b")}, destroyed("b"), []Record{held("istiod-1")}), "istiod-1", true},
		{"b took the lock from c, to which a had handed it", join([]Record{held("a"), {Holder: "c", Writer: "a"}, held("c"), held("b")}, destroyed("b"), []Record{held("istiod-1")}), "istiod-1", false},
		{"b took the lock from c, which took a free lock after a", join([]Record{held("a"), {Writer: "a"}, held("c"), held("b")}, destroyed("b"), []Record{held("istiod-1")}), "istiod-1", false},
	} {
		w.records = tc.records
		why := w.excuse(wk, tc.starter, w.clock.Now())
		if (why != "") != tc.excused {
			t.Errorf("%s: excuse = %q, want excused %v", tc.name, why, tc.excused)
		}
	}
}

// A list after a broken watch shows the objects as that watch last saw
// them; what changed meanwhile comes next through the new watch, in the
// order of names (deletions last), not in the order of the writes.
func TestRelistCatchesUpByName(t *testing.T) {
	api, st, c := newTestAPI()
	ctx := context.Background()
	cms := c.CoreV1().ConfigMaps(Namespace)
	create := func(name string) {
		t.Helper()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label := func(name string) {
		t.Helper()
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Labels = map[string]string{"changed": "yes"}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("b")
	create("c")
	first, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	api.breakWatches(st)
	w.Stop()
	// While the watch is broken: c changes, then a is created, b deleted.
	label("c")
	create("a")
	if err := api.deleteLock(configMaps, "b"); err != nil {
		t.Fatal(err)
	}
	again, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, cm := range again.Items {
		if cm.Labels["changed"] != "" {
			t.Errorf("the list shows %s as changed; the watch never saw that", cm.Name)
		}
		listed = append(listed, cm.Name)
	}
	if strings.Join(listed, ",") != "b,c" {
		t.Fatalf("the list shows %v, want b and c as the watch last saw them", listed)
	}
	w, err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: again.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	api.deliver(func() {})
	var got []string
	for range 3 {
		ev := <-w.ResultChan()
		cm := ev.Object.(*corev1.ConfigMap)
		got = append(got, string(ev.Type)+" "+cm.Name)
	}
	if want := "ADDED a,MODIFIED c,DELETED b"; strings.Join(got, ",") != want {
		t.Fatalf("the watch after the list delivered %v, want %s", got, want)
	}
	if n := len(w.ResultChan()); n != 0 {
		t.Fatalf("%d more events after the catch-up", n)
	}
}
