package pacing

import (
	"context"

	"github.com/meshd-io/meshd/internal/protocol"
)

// Problems lists what is wrong with an elector's Config.Pacer (nil: not
// paced, nothing to check).
func Problems(p protocol.Pacer) []string {
	if p != nil && !p.Built() {
		return []string{"Pacer was not built by NewPacer"}
	}
	return nil
}

// First is one elector's pacing as its core calls it: the elector's
// Config.Pacer (nil: not paced, as a pacer of its own would never make it
// wait), asked for the elector's very first attempt only. It is used by
// one election loop only.
type First struct {
	p     protocol.Pacer
	paced bool // the first attempt has been paced
}

// NewFirst returns the pacing of one elector given p (possibly nil).
func NewFirst(p protocol.Pacer) *First { return &First{p: p} }

// Turn waits for the turn of the elector's first attempt as p.Turn does,
// the first time it is called; later, and without a pacer, it returns at
// once. release gives the turn back after the attempt.
func (f *First) Turn(ctx context.Context, name string, wakeups <-chan struct{}, giveUp func() bool) (release func()) {
	done := f.paced
	f.paced = true
	if done || f.p == nil {
		return func() {}
	}
	return f.p.Turn(ctx, name, wakeups, giveUp)
}
