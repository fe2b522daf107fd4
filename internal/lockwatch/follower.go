package lockwatch

import (
	"sync"
	"sync/atomic"
)

// Follower is one elector's subscription to the shared watch of its lock:
// it queues what the hub delivers, in order, until the election loop takes
// it, keeps the watch's health as the hub reports it, and wakes the loop
// through Events. It holds nothing of the elector.
//
// Guarantees: deliveries are taken in the order the hub made them; when
// more than MaxPending wait, the oldest are dropped and Take says so (the
// loop then treats the holder's lease as renewed: a later takeover, never
// an earlier one); the cache a hub replays to a joining subscriber does not
// make the watch healthy, only the hub's reports and live deliveries do.
type Follower struct {
	// onBreak, if set, is called when a healthy watch breaks.
	onBreak func()

	// events has room for one wake-up; what the watch delivered meanwhile
	// waits in pending, in order.
	events chan struct{}

	mu      sync.Mutex
	pending []Delivery
	// dropped is set when pending overflowed and its oldest entries were
	// dropped unseen.
	dropped bool
	// up is closed when the watch becomes healthy after Start; Start opens
	// a new one when the watch is not healthy then.
	up       chan struct{}
	upClosed bool

	// ok is true from the first successful list or event until the watch
	// reports an error, and again from the next event.
	ok atomic.Bool
	// epoch counts the periods in which ok was true (under mu).
	epoch uint64
	// joining is set while the hub subscribes this follower: what it
	// delivers meanwhile is its cache replayed, which it hands over even
	// while the shared watch is broken, so it says nothing of its health.
	joining atomic.Bool
	// last is the resourceVersion of the latest delivery ("" for a
	// deletion or an object without one), and lastEpoch the period of
	// health it was delivered in (0 for a replay while joining); under mu.
	last      string
	lastEpoch uint64
}

// Delivery is one object (or deletion) the watch handed over.
type Delivery struct {
	Obj     any
	Deleted bool
}

// MaxPending bounds the deliveries waiting for the loop.
const MaxPending = 64

// NewFollower returns a follower that calls onBreak (if not nil) each time
// its healthy watch breaks.
func NewFollower(onBreak func()) *Follower {
	return &Follower{onBreak: onBreak, events: make(chan struct{}, 1), up: make(chan struct{})}
}

// Events is ready when something was delivered or the watch broke.
func (f *Follower) Events() <-chan struct{} { return f.events }

// Healthy reports whether the watch can be trusted to report every change.
func (f *Follower) Healthy() bool { return f.ok.Load() }

// Epoch numbers the current period of health: it changes each time the
// watch becomes healthy again, and is 0 while it is not healthy. A loop
// that saw the same non-zero Epoch at two moments knows the watch did not
// break in between, so it has been handed every change up to the latest
// delivery; a watch healthy again after a break may still be catching up
// with what changed while it was broken.
func (f *Follower) Epoch() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok.Load() {
		return 0
	}
	return f.epoch
}

// Covers reports whether the watch has handed over, or will hand over in
// order, every change of the object made after a write of it: a write
// before which Epoch returned epoch, with the watch unbroken since; or the
// write that produced version, when that is the version the watch
// delivered last, in the current period of health. The second is what a
// watch that broke during or after the write offers once it has listed
// again (or resumed) and handed the written version over: the object was
// still at that version when it did, and every later change comes after
// it. An empty version covers nothing.
func (f *Follower) Covers(epoch uint64, version string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok.Load() {
		return false
	}
	return epoch == f.epoch || (version != "" && version == f.last && f.lastEpoch == f.epoch)
}

// HealthyNow is closed once the watch is healthy after the last Start.
func (f *Follower) HealthyNow() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up
}

// Start follows lock's object through hub until the returned function is
// called; that function returns once the hub will not call this follower
// again (and, if it was the last subscriber of that watch, once the watch
// has stopped).
func (f *Follower) Start(hub *WatchHub, lock Source) (stop func()) {
	f.mu.Lock()
	if f.upClosed && !f.ok.Load() {
		f.up, f.upClosed = make(chan struct{}), false
	}
	f.mu.Unlock()
	f.joining.Store(true)
	unsubscribe := hub.Subscribe(lock, Subscriber{OnObject: f.Deliver, OnHealth: f.SetHealth})
	f.joining.Store(false)
	return func() {
		unsubscribe()
		f.MarkHealthy(false)
	}
}

// SetHealth takes the hub's report that the shared watch listed (true) or
// broke (false).
func (f *Follower) SetHealth(ok bool) {
	if ok {
		f.mu.Lock()
		f.markHealthy()
		if !f.upClosed {
			close(f.up)
			f.upClosed = true
		}
		f.mu.Unlock()
		return
	}
	f.mu.Lock()
	was := f.ok.Swap(false)
	f.mu.Unlock()
	if was {
		if f.onBreak != nil {
			f.onBreak()
		}
		// Wake the loop: a follower asleep until the lease end it computed
		// must poll now, since renewals no longer reach it.
		f.wake()
	}
}

// MarkHealthy sets the health as the hub would report it, without waking
// the loop or closing HealthyNow: for the end of a Start, and for tests
// that drive a loop step by step.
func (f *Follower) MarkHealthy(ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ok {
		f.markHealthy()
		return
	}
	f.ok.Store(false)
}

// markHealthy sets ok, opening a new epoch if it was not set; f.mu is held.
func (f *Follower) markHealthy() {
	if !f.ok.Load() {
		f.epoch++
	}
	f.ok.Store(true)
}

func (f *Follower) wake() {
	select {
	case f.events <- struct{}{}:
	default:
	}
}

// Deliver queues the newest object (or a deletion) from the hub. A live
// delivery means the watch works; the cached object the hub hands a
// subscriber that joins does not (the hub hands it over even while the
// shared watch is broken and no watch is open), so a delivery while
// joining leaves the health to the hub's own report.
func (f *Follower) Deliver(obj any, deleted bool) {
	live := !f.joining.Load()
	f.mu.Lock()
	if len(f.pending) == MaxPending {
		f.pending = append(f.pending[:0], f.pending[1:]...)
		f.dropped = true
	}
	f.pending = append(f.pending, Delivery{Obj: obj, Deleted: deleted})
	f.last, f.lastEpoch = versionOf(obj, deleted), 0
	if live {
		// The period SetHealth(true) below is in: a new one if the watch
		// is not healthy now. Should a break come in between, the period
		// noted is one that has ended, which covers nothing.
		f.lastEpoch = f.epoch
		if !f.ok.Load() {
			f.lastEpoch++
		}
	}
	f.mu.Unlock()
	if live {
		f.SetHealth(true)
	}
	f.wake()
}

// versionOf is the resourceVersion of a delivered object; "" for a
// deletion.
func versionOf(obj any, deleted bool) string {
	if o, ok := obj.(interface{ GetResourceVersion() string }); ok && !deleted {
		return o.GetResourceVersion()
	}
	return ""
}

// Take returns what was delivered since the last Take, oldest first, and
// whether older deliveries were dropped unseen.
func (f *Follower) Take() (batch []Delivery, dropped bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	batch, dropped = f.pending, f.dropped
	f.pending, f.dropped = nil, false
	return batch, dropped
}
