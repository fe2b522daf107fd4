// Package ownstack runs a function on a goroutine of its own and waits for
// it, so that the stack the function needs is not left to the caller.
//
// A goroutine's stack grows when a call needs more and stays grown: the
// runtime halves it at a garbage collection only while less than a quarter
// of it is in use, and only once per collection. An election's goroutine
// lives as long as the election and spends almost all its time waiting
// with a few frames on its stack; what it does between two waits (a
// decision on a record, an API request, a log line) runs deep. Done on its
// own goroutine, that work's stack goes back to the runtime when it
// returns, and the waiting goroutine keeps the small stack its wait needs,
// instead of swinging between a grown stack after each wake-up and a
// halved one after each collection. With thousands of elections in one
// process that is several MiB. The cost is a goroutine start per call.
package ownstack

// Call runs f on a new goroutine and returns its result once it has
// returned. A panic in f is raised again in the caller, with the value f
// panicked with. Call has the caller's semantics otherwise: the caller
// blocks until f is done, so f may use what the caller owns.
func Call[T any](f func() T) T {
	type outcome struct {
		v        T
		panicked bool
		panicVal any
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			if r := recover(); r != nil {
				o.panicked, o.panicVal = true, r
			}
			done <- o
		}()
		o.v = f()
	}()
	o := <-done
	if o.panicked {
		panic(o.panicVal)
	}
	return o.v
}
