// Package ordered receives from the first ready of several channels in a
// fixed order of priority.
//
// A Go select among several ready channels picks one at random. A loop
// that wakes on several sources (a watch delivery, a timer, a trigger)
// then acts in an order that depends on that draw and on the scheduler,
// not on what happened: the same events give different runs, which a
// simulation cannot replay, and a delivery that shows the lock taken may
// be acted on after a renewal it should have prevented. First takes the
// ready channels in the order the caller gives.
//
// Guarantee: when First returns i, no channel before i was ready at the
// moment First looked, which is after every send that happened before the
// call. While it blocks, it wakes on whichever channel becomes ready
// first, as a select does.
package ordered

import "reflect"

// First receives one value from the first of chans, in the order given,
// that has one ready, and returns its index; if none is ready, it blocks
// until one is. A nil channel is never ready, as in a select. Every
// element of chans must be a channel that can be received from; First
// panics otherwise, as the program is wrong.
func First(chans ...any) int {
	cases := make([]reflect.SelectCase, len(chans))
	for i, c := range chans {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)}
		if cases[i].Chan.Kind() != reflect.Chan {
			panic("ordered.First: argument " + reflect.TypeOf(c).String() + " is not a channel")
		}
	}
	nonBlocking := []reflect.SelectCase{{}, {Dir: reflect.SelectDefault}}
	for i := range cases {
		nonBlocking[0] = cases[i]
		if chosen, _, _ := reflect.Select(nonBlocking); chosen == 0 {
			return i
		}
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen
}
