package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// leaderFlags polls the /debug/elections of some processes every 10ms and
// remembers, per process and lock, when the process first said it leads and
// when it first said it does not. A lock record naming a new holder can
// precede the holder's own view (the old holder writes it when it hands
// over), so the story waits for both.
type leaderFlags struct {
	mu     sync.Mutex
	seen   map[string]flagTimes // by process/lock
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// flagTimes are, for one process and lock: when it was first seen leading
// and first seen not leading (when the answer arrived), and when the last
// request that found it leading was sent. The process was certainly
// leading at some moment after lastLeadingSent.
type flagTimes struct{ leading, notLeading, lastLeadingSent time.Time }

const flagPollEvery = 10 * time.Millisecond

// watchLeaderFlags starts polling the named members that are running.
func (d *demo) watchLeaderFlags(names ...string) *leaderFlags {
	ctx, cancel := context.WithCancel(d.ctx)
	f := &leaderFlags{seen: map[string]flagTimes{}, cancel: cancel}
	for _, name := range names {
		p := d.procs[name].process()
		if p == nil || !p.Running() {
			continue
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			t := time.NewTicker(flagPollEvery)
			defer t.Stop()
			for {
				asked := time.Now()
				qctx, qcancel := context.WithTimeout(ctx, time.Second)
				st, err := p.Elections(qctx)
				qcancel()
				now := time.Now()
				if err == nil {
					f.mu.Lock()
					for _, s := range st {
						k := name + "/" + s.Name
						ft := f.seen[k]
						if s.Leader && ft.leading.IsZero() {
							ft.leading = now
						}
						if s.Leader {
							ft.lastLeadingSent = asked
						}
						if !s.Leader && ft.notLeading.IsZero() {
							ft.notLeading = now
						}
						f.seen[k] = ft
					}
					f.mu.Unlock()
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	return f
}

// wait returns when member name first said it leads lockName (leading) or
// does not (!leading), waiting up to timeout for it to say so.
func (f *leaderFlags) wait(ctx context.Context, name, lockName string, leading bool, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		ft := f.seen[name+"/"+lockName]
		f.mu.Unlock()
		at := ft.notLeading
		if leading {
			at = ft.leading
		}
		if !at.IsZero() {
			return at, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s did not report leader=%v for %s on /debug/elections within %v", name, leading, lockName, timeout)
		}
		if err := sleep(ctx, flagPollEvery); err != nil {
			return time.Time{}, err
		}
	}
}

// leading returns when member name first said it leads lockName, zero if
// it has not (yet).
func (f *leaderFlags) leading(name, lockName string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[name+"/"+lockName].leading
}

// lastLeading returns the send time of the last request that found member
// name leading lockName, zero if none did.
func (f *leaderFlags) lastLeading(name, lockName string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[name+"/"+lockName].lastLeadingSent
}

func (f *leaderFlags) stop() {
	f.cancel()
	f.wg.Wait()
}
