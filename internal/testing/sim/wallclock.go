package sim

import (
	"time"
)

// The wall clock of an actor.
//
// Every actor runs on the world's clock, which stands for the monotonic
// clock of its process: the durations it measures (leases by observation,
// retry periods, deadlines) are the world's. Its wall clock, which it
// writes into objects and compares with what others wrote, may be off the
// world's clock by an offset that the world can step. The actor's clock
// (actorClock, monotime.go) carries both readings in every time it gives,
// as time.Now does: the wall reading with the offset, the monotonic one
// without. The API stores what the actor wrote, and every actor reads it
// as stored.

// wallOffset is how far the actor's wall clock is ahead of the world's.
func (s *actorState) wallOffset() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wall
}

// stepWall moves the actor's wall clock by d (backwards when negative) and
// returns the new offset.
func (s *actorState) stepWall(d time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall += d
	return s.wall
}
