// Package ordered receives from the first ready of several channels in a
// fixed order of priority.
//
// A Go select among several ready channels picks one at random. A loop
// that wakes on several sources (a watch delivery, a timer, a trigger)
// then acts in an order that depends on that draw and on the scheduler,
// not on what happened: the same events give different runs, which a
// simulation cannot replay, and a delivery that shows the lock taken may
// be acted on after a renewal it should have prevented. First3, First4 and
// First6 take the ready channels in the order of their arguments.
//
// Guarantee: when FirstN returns i, no channel before i was ready at the
// moment it looked, which is after every send that happened before the
// call. While it blocks, it wakes on whichever channel becomes ready
// first, as a select does. A nil channel is never ready, as in a select.
//
// One function per number of channels, with the element types as type
// parameters, rather than one variadic function over reflect.Select: the
// compiler checks the arguments, a call allocates nothing, and a goroutine
// blocked in one holds a small frame. The last two matter with thousands
// of elections in one process, each of whose loops waits here: a variadic
// version allocated twice per call, and its deeper frames kept the stacks
// of waiting goroutines from being halved by the runtime, which it does
// only while the part in use is small. The non-blocking looks are written
// out rather than put in a helper: the compiler never inlines a function
// that holds a select, and a call per look doubled the cost of a wait.
package ordered

// First3 receives one value from the first ready of a, b and c, in that
// order, blocking until one is ready, and returns its index (0 to 2).
func First3[A, B, C any](a <-chan A, b <-chan B, c <-chan C) int {
	select {
	case <-a:
		return 0
	default:
	}
	select {
	case <-b:
		return 1
	default:
	}
	select {
	case <-c:
		return 2
	default:
	}
	select {
	case <-a:
		return 0
	case <-b:
		return 1
	case <-c:
		return 2
	}
}

// First4 is First3 with a fourth channel, d (index 3).
func First4[A, B, C, D any](a <-chan A, b <-chan B, c <-chan C, d <-chan D) int {
	select {
	case <-a:
		return 0
	default:
	}
	select {
	case <-b:
		return 1
	default:
	}
	select {
	case <-c:
		return 2
	default:
	}
	select {
	case <-d:
		return 3
	default:
	}
	select {
	case <-a:
		return 0
	case <-b:
		return 1
	case <-c:
		return 2
	case <-d:
		return 3
	}
}

// First6 is First4 with two more channels, e (index 4) and f (index 5).
func First6[A, B, C, D, E, F any](a <-chan A, b <-chan B, c <-chan C, d <-chan D, e <-chan E, f <-chan F) int {
	select {
	case <-a:
		return 0
	default:
	}
	select {
	case <-b:
		return 1
	default:
	}
	select {
	case <-c:
		return 2
	default:
	}
	select {
	case <-d:
		return 3
	default:
	}
	select {
	case <-e:
		return 4
	default:
	}
	select {
	case <-f:
		return 5
	default:
	}
	select {
	case <-a:
		return 0
	case <-b:
		return 1
	case <-c:
		return 2
	case <-d:
		return 3
	case <-e:
		return 4
	case <-f:
		return 5
	}
}
