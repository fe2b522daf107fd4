package coordinated

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/internal/refcount"
)

// leaseNameIndex indexes LeaseCandidates by spec.leaseName.
const leaseNameIndex = "leaseName"

// Roster is a cache of the LeaseCandidates of one namespace, shared by every
// user that passes the same client, namespace and clock to Acquire of the
// same Rosters. It starts with its first acquisition and stops, with every
// goroutine it started, when the last one is released.
//
// Its answers are as fresh as its watch (normally well under a second
// behind the API server). Before HasSynced they may be incomplete. Its
// methods are safe for concurrent use.
type Roster struct {
	key      rosterKey
	clock    clock.PassiveClock
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	synced   cache.InformerSynced
	stop     chan struct{}

	mu     sync.Mutex
	nextID int
	byName map[string]map[int]func(*coordinationv1beta1.LeaseCandidate)
	all    map[int]func(leaseName string)
}

type rosterKey struct {
	client    kubernetes.Interface
	namespace string
	clock     clock.PassiveClock
}

// Rosters holds the running Rosters that its users share: one per client,
// namespace and clock. Users of two Rosters never share a Roster, so the
// program (or a test building independent worlds in one process) decides
// what is shared by which Rosters it passes in; package election's Group
// keeps one for its elections.
//
// A Rosters runs goroutines only while one of its Rosters is acquired. It
// is safe for concurrent use. The zero value is not usable: call
// NewRosters.
type Rosters struct {
	rosters *refcount.Registry[rosterKey, *Roster] // nil unless built by NewRosters
}

// NewRosters returns a Rosters that runs no Roster yet.
func NewRosters() *Rosters { return &Rosters{rosters: new(refcount.Registry[rosterKey, *Roster])} }

// Running is the number of Rosters running now.
func (rs *Rosters) Running() int {
	if rs.rosters == nil {
		return 0
	}
	return rs.rosters.Len()
}

// Acquire returns the Roster of namespace for client, starting it if no
// user of rs uses it yet. clk (nil means the real clock) judges liveness.
// Call release once when done; the last release stops the Roster and waits
// for its goroutines. client and clk must be comparable values (pointers,
// as clientsets and fake clocks are) because they identify the shared
// Roster.
func (rs *Rosters) Acquire(client kubernetes.Interface, namespace string, clk clock.PassiveClock) (*Roster, func(), error) {
	if rs == nil || rs.rosters == nil {
		return nil, nil, errors.New("coordinated: Rosters not built with NewRosters")
	}
	if client == nil || namespace == "" {
		return nil, nil, errors.New("coordinated: Acquire needs a client and a namespace")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if !reflect.TypeOf(client).Comparable() || !reflect.TypeOf(clk).Comparable() {
		return nil, nil, fmt.Errorf("coordinated: client %T or clock %T cannot identify a shared roster (not comparable)", client, clk)
	}
	key := rosterKey{client: client, namespace: namespace, clock: clk}
	return rs.rosters.Acquire(key, func() (*Roster, func(), error) {
		r, err := startRoster(key)
		if err != nil {
			return nil, nil, err
		}
		return r, r.shutdown, nil
	})
}

func startRoster(key rosterKey) (*Roster, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(key.client, 0, informers.WithNamespace(key.namespace))
	inf := factory.Coordination().V1beta1().LeaseCandidates().Informer()
	if err := inf.AddIndexers(cache.Indexers{leaseNameIndex: indexByLeaseName}); err != nil {
		return nil, fmt.Errorf("coordinated: index lease candidates: %w", err)
	}
	r := &Roster{
		key: key, clock: key.clock, factory: factory, informer: inf,
		stop:   make(chan struct{}),
		byName: map[string]map[int]func(*coordinationv1beta1.LeaseCandidate){},
		all:    map[int]func(string){},
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.notify(obj, false) },
		UpdateFunc: func(_, obj any) { r.notify(obj, false) },
		DeleteFunc: func(obj any) { r.notify(obj, true) },
	})
	if err != nil {
		return nil, fmt.Errorf("coordinated: watch lease candidates: %w", err)
	}
	r.synced = reg.HasSynced
	factory.Start(r.stop)
	return r, nil
}

func indexByLeaseName(obj any) ([]string, error) {
	if lc, ok := obj.(*coordinationv1beta1.LeaseCandidate); ok {
		return []string{lc.Spec.LeaseName}, nil
	}
	return nil, nil
}

// shutdown stops the Roster's informer and waits for its goroutines; its
// Rosters calls it once, when the last user releases it.
func (r *Roster) shutdown() {
	close(r.stop)
	r.factory.Shutdown()
}

// HasSynced reports whether the first list of candidates has been read.
func (r *Roster) HasSynced() bool { return r.synced() }

// Get returns a copy of the cached LeaseCandidate name, if any.
func (r *Roster) Get(name string) (*coordinationv1beta1.LeaseCandidate, bool) {
	obj, ok, err := r.informer.GetStore().GetByKey(r.key.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	lc, ok := obj.(*coordinationv1beta1.LeaseCandidate)
	if !ok {
		return nil, false
	}
	return lc.DeepCopy(), true
}

// Candidates returns every candidate of leaseName, live or not, sorted by
// name, with Live judged now.
func (r *Roster) Candidates(leaseName string) []Candidate {
	objs, err := r.informer.GetIndexer().ByIndex(leaseNameIndex, leaseName)
	if err != nil {
		return nil
	}
	now := r.clock.Now()
	out := make([]Candidate, 0, len(objs))
	for _, obj := range objs {
		if lc, ok := obj.(*coordinationv1beta1.LeaseCandidate); ok {
			out = append(out, candidateFrom(lc, now))
		}
	}
	rankByName(out)
	return out
}

// Ranked returns the live candidates of leaseName, best first (see rank):
// the mesh's priority rule under defaultRevision ("" means none known),
// then the oldest binary version, then the name. The first member is the
// one the coordinator picks for a vacant Lease (if it answers a ping).
func (r *Roster) Ranked(leaseName, defaultRevision string) []Member {
	return members(liveRanked(r.Candidates(leaseName), defaultRevision))
}

// Subscribe calls fn after every change of the LeaseCandidate name with the
// object as that change left it (nil after a delete), from the Roster's
// event goroutine. Events arrive in order but may trail the cache: judge a
// change by the object passed, not by Get. fn must not modify the object,
// must return quickly and must not call Rosters.Acquire or a release. Call
// the returned function to stop.
func (r *Roster) Subscribe(name string, fn func(*coordinationv1beta1.LeaseCandidate)) (unsubscribe func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.nextID
	r.nextID++
	if r.byName[name] == nil {
		r.byName[name] = map[int]func(*coordinationv1beta1.LeaseCandidate){}
	}
	r.byName[name][id] = fn
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.byName[name], id)
		if len(r.byName[name]) == 0 {
			delete(r.byName, name)
		}
	}
}

// SubscribeAll calls fn with the lease name after every change of any
// candidate, under the same rules as Subscribe.
func (r *Roster) SubscribeAll(fn func(leaseName string)) (unsubscribe func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.nextID
	r.nextID++
	r.all[id] = fn
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.all, id)
	}
}

func (r *Roster) notify(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	lc, ok := obj.(*coordinationv1beta1.LeaseCandidate)
	if !ok {
		return
	}
	state := lc
	if deleted {
		state = nil
	}
	r.mu.Lock()
	var fns []func()
	for _, fn := range r.byName[lc.Name] {
		fns = append(fns, func() { fn(state) })
	}
	for _, fn := range r.all {
		fns = append(fns, func() { fn(lc.Spec.LeaseName) })
	}
	r.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// liveRanked returns the live candidates of cands ranked best first.
func liveRanked(cands []Candidate, defaultRevision string) []Candidate {
	var live []Candidate
	for _, c := range cands {
		if c.Live {
			live = append(live, c)
		}
	}
	rank(live, defaultRevision)
	return live
}

func members(cands []Candidate) []Member {
	out := make([]Member, len(cands))
	for i, c := range cands {
		out[i] = Member{Name: c.Name, Key: c.Key}
	}
	return out
}

// leaseNames returns the names of the Leases that have candidates.
func (r *Roster) leaseNames() []string {
	return r.informer.GetIndexer().ListIndexFuncValues(leaseNameIndex)
}
