// Package refcount keeps shared objects alive for as long as someone uses
// them. A Registry holds at most one entry per key: the first Acquire of a
// key creates the entry's value, later ones share it, and the release of
// the last user stops it and forgets the key.
//
// Guarantees of a Registry:
//
//   - One entry per key. create runs only when the key has no entry, and
//     runs under the registry's lock, so two users of one key never create
//     two values. create must therefore be quick and must not call the
//     registry; creations of different keys wait for each other.
//   - A failed create leaves nothing behind: the error is returned to the
//     caller that ran it, the key stays absent, and the next Acquire of the
//     key calls create again.
//   - Every successful Acquire returns a release function. Calling it more
//     than once is harmless: only the first call counts.
//   - The release of the last user removes the entry under the lock, then
//     calls the entry's stop function once, outside the lock, and returns
//     after stop has returned. Stop may therefore wait (for goroutines,
//     for an informer to shut down) without blocking other keys.
//   - An entry being stopped is never handed out again: an Acquire of its
//     key once the last release has begun creates a fresh value, which may
//     start before the old one has finished stopping.
//
// A Registry keeps no state outside itself (the package has no
// package-level variables), so two registries never share an entry. It is
// safe for concurrent use, its zero value is an empty registry, and it must
// not be copied after first use.
package refcount

import (
	"sync"
	"sync/atomic"
)

// Registry is a set of reference-counted values of type V, one per key of
// type K. See the package documentation for its guarantees.
type Registry[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]*entry[K, V]
}

// entry is one shared value, its key, its stop function and its number
// of users. The key is kept here, once, rather than by each user's
// release: with thousands of users of one value, a copy per user would
// cost more than the value.
type entry[K comparable, V any] struct {
	key   K
	value V
	stop  func()
	refs  int // guarded by Registry.mu
}

// user is one successful Acquire; release is its release function.
type user[K comparable, V any] struct {
	r    *Registry[K, V]
	e    *entry[K, V]
	done atomic.Bool
}

func (u *user[K, V]) release() {
	if u.done.CompareAndSwap(false, true) {
		u.r.leave(u.e)
	}
}

// Acquire returns the value of key, calling create to make it when the key
// has no entry. create returns the value, the function that stops it when
// its last user releases it (nil when there is nothing to stop) and an
// error; on an error Acquire records nothing and returns the zero V, a nil
// release and the error.
//
// The caller must call release once it no longer uses the value; further
// calls do nothing. The last user's release returns after the value's stop
// function has returned.
func (r *Registry[K, V]) Acquire(key K, create func() (V, func(), error)) (v V, release func(), err error) {
	e, err := r.join(key, create)
	if err != nil {
		var zero V
		return zero, nil, err
	}
	u := &user[K, V]{r: r, e: e}
	return e.value, u.release, nil
}

// join counts one more user of key's entry, creating it if there is none.
func (r *Registry[K, V]) join(key K, create func() (V, func(), error)) (*entry[K, V], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if !ok {
		v, stop, err := create()
		if err != nil {
			return nil, err
		}
		if r.entries == nil {
			r.entries = map[K]*entry[K, V]{}
		}
		e = &entry[K, V]{key: key, value: v, stop: stop}
		r.entries[key] = e
	}
	e.refs++
	return e, nil
}

// leave counts one user of e less and, if it was the last, forgets e and
// stops it outside the lock.
func (r *Registry[K, V]) leave(e *entry[K, V]) {
	r.mu.Lock()
	e.refs--
	last := e.refs == 0
	if last && r.entries[e.key] == e {
		delete(r.entries, e.key)
	}
	r.mu.Unlock()
	if last && e.stop != nil {
		e.stop()
	}
}

// Len is the number of entries the registry holds now: values created and
// not yet released by their last user.
func (r *Registry[K, V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// Users is the number of acquisitions not yet released, over every entry.
func (r *Registry[K, V]) Users() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.entries {
		n += e.refs
	}
	return n
}
