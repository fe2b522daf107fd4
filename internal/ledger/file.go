package ledger

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// File appends intervals to a file as JSON lines, so that several processes
// on one host can write ledgers that are merged later with ReadFiles. Times
// are CLOCK_MONOTONIC readings, which all processes of a host share and
// which do not jump when the wall clock is set.
type File struct {
	mu   sync.Mutex
	f    *os.File
	id   string
	next atomic.Int64
}

// entry is one line: the start or the stop of interval ID.
type entry struct {
	ID       string `json:"id"`
	Event    string `json:"event"` // "start" or "stop"
	Election string `json:"election,omitempty"`
	Holder   string `json:"holder,omitempty"`
	Mono     int64  `json:"mono"` // CLOCK_MONOTONIC, nanoseconds
}

// OpenFile opens (creating or appending to) a ledger file.
func OpenFile(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &File{f: f, id: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}, nil
}

// Wrap returns f with its runs appended to the file as intervals of holder
// in election. Write errors are dropped: a ledger must never stop the work
// it observes.
func (l *File) Wrap(election, holder string, f func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		id := fmt.Sprintf("%s-%d", l.id, l.next.Add(1))
		l.write(entry{ID: id, Event: "start", Election: election, Holder: holder, Mono: monotonic()})
		defer func() { l.write(entry{ID: id, Event: "stop", Mono: monotonic()}) }()
		f(ctx)
	}
}

func (l *File) write(e entry) {
	line, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(line, '\n'))
}

// Close closes the file.
func (l *File) Close() error { return l.f.Close() }

// ReadFiles merges ledger files into one Ledger. An interval whose stop is
// missing (its process was killed) ends at the last time any file recorded.
// That is an upper bound, so a killed process can show overlap it did not
// have; a caller that knows when each process died should cut its open
// intervals there instead (as the chaos run does).
func ReadFiles(paths ...string) (*Ledger, error) {
	starts := map[string]entry{}
	stops := map[string]int64{}
	var order []string
	var last int64
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("read ledger: %w", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				continue // a line cut short by SIGKILL
			}
			last = max(last, e.Mono)
			switch e.Event {
			case "start":
				starts[e.ID] = e
				order = append(order, e.ID)
			case "stop":
				stops[e.ID] = e.Mono
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read ledger %s: %w", p, err)
		}
	}
	l := &Ledger{}
	for _, id := range order {
		s := starts[id]
		stop, ok := stops[id]
		if !ok {
			stop = last
		}
		l.intervals = append(l.intervals, Interval{
			Election: s.Election, Holder: s.Holder,
			Start: time.Unix(0, s.Mono), Stop: time.Unix(0, stop),
		})
	}
	return l, nil
}

func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}
