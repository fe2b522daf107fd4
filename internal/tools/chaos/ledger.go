package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// The ledger files are those meshd writes with --ledger-file (see
// internal/ledger): one JSON line per start and stop of a controller term,
// with CLOCK_MONOTONIC times that every process of the host shares. The
// chaos run reads them itself rather than with ledger.ReadFiles because it
// knows more: when each process died. A SIGKILLed process leaves its terms
// open, and they end exactly when the process did, not at the last line of
// any file.

// LedgerLine is one line of a ledger file.
type LedgerLine struct {
	ID       string `json:"id"`
	Event    string `json:"event"` // "start" or "stop"
	Election string `json:"election,omitempty"`
	Holder   string `json:"holder,omitempty"`
	Mono     int64  `json:"mono"`
}

// maxLedgerLine bounds one line; meshd's are about 150 bytes.
const maxLedgerLine = 4 << 10

// ParseLedgerLine decodes one line and checks that it makes sense: a known
// event, an ID, a positive time, and for a start the election and holder.
func ParseLedgerLine(line []byte) (LedgerLine, error) {
	var l LedgerLine
	if len(line) > maxLedgerLine {
		return l, fmt.Errorf("ledger line of %d bytes exceeds %d", len(line), maxLedgerLine)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return LedgerLine{}, fmt.Errorf("ledger line: %w", err)
	}
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
		return LedgerLine{}, errors.New("ledger line: trailing data")
	}
	switch {
	case l.ID == "":
		return LedgerLine{}, errors.New("ledger line: no id")
	case l.Mono <= 0:
		return LedgerLine{}, fmt.Errorf("ledger line %s: time %d is not positive", l.ID, l.Mono)
	case l.Event == "start" && (l.Election == "" || l.Holder == ""):
		return LedgerLine{}, fmt.Errorf("ledger line %s: start without election or holder", l.ID)
	case l.Event != "start" && l.Event != "stop":
		return LedgerLine{}, fmt.Errorf("ledger line %s: unknown event %q", l.ID, l.Event)
	}
	return l, nil
}

// LedgerFile is the ledger of one process: one incarnation of an instance.
type LedgerFile struct {
	Path string
	// Holder names the process in the intervals read, instead of the
	// identity written in the file, so that two incarnations of one
	// instance count as different holders.
	Holder string
	// End is when the process was seen dead (CLOCK_MONOTONIC); terms still
	// open end then. Zero means it is still running: they end at ReadLedgers'
	// now argument.
	End Mono
}

// Mono is a CLOCK_MONOTONIC reading in nanoseconds.
type Mono int64

// Now reads CLOCK_MONOTONIC, the clock of the ledger files.
func Now() Mono {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("chaos: CLOCK_MONOTONIC: %v", err)) // cannot happen on Linux
	}
	return Mono(ts.Nano())
}

// Sub is m - o.
func (m Mono) Sub(o Mono) time.Duration { return time.Duration(m - o) }

// Add is m + d.
func (m Mono) Add(d time.Duration) Mono { return m + Mono(d) }

// Interval is one term of work of one holder in one election.
type Interval struct {
	Election string
	Holder   string
	Start    Mono
	Stop     Mono
	// Open is set when no stop was written: the term ended with its process
	// (killed), or was still running when the file was read.
	Open bool
}

// ReadLedgers reads the files and returns every term, ordered by start.
// Lines that cannot be parsed are an error, except a final line cut short,
// which a SIGKILL can leave.
func ReadLedgers(now Mono, files ...LedgerFile) ([]Interval, error) {
	var out []Interval
	for _, f := range files {
		ivs, err := readLedger(f, now)
		if err != nil {
			return nil, err
		}
		out = append(out, ivs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, nil
}

func readLedger(f LedgerFile, now Mono) ([]Interval, error) {
	fh, err := os.Open(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // the process died before its first term
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	end := f.End
	if end == 0 {
		end = now
	}
	var (
		order  []string
		starts = map[string]LedgerLine{}
		stops  = map[string]Mono{}
		bad    error
	)
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, maxLedgerLine), maxLedgerLine+1)
	for n := 1; sc.Scan(); n++ {
		if bad != nil {
			return nil, bad // a bad line that was not the last
		}
		l, err := ParseLedgerLine(sc.Bytes())
		if err != nil {
			bad = fmt.Errorf("%s:%d: %w", f.Path, n, err)
			continue
		}
		switch l.Event {
		case "start":
			if _, dup := starts[l.ID]; dup {
				return nil, fmt.Errorf("%s:%d: second start of %s", f.Path, n, l.ID)
			}
			starts[l.ID] = l
			order = append(order, l.ID)
		case "stop":
			stops[l.ID] = Mono(l.Mono)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	holder := f.Holder
	var out []Interval
	for _, id := range order {
		s := starts[id]
		iv := Interval{Election: s.Election, Holder: holder, Start: Mono(s.Mono)}
		if holder == "" {
			iv.Holder = s.Holder
		}
		if stop, ok := stops[id]; ok {
			iv.Stop = stop
		} else {
			iv.Stop, iv.Open = max(end, iv.Start), true
		}
		if iv.Stop < iv.Start {
			return nil, fmt.Errorf("%s: term %s stops before it starts", f.Path, id)
		}
		out = append(out, iv)
	}
	return out, nil
}

// Overlap is time during which two holders of one election both ran.
type Overlap struct {
	Election string
	A, B     string
	At       Mono
	Duration time.Duration
}

// Overlaps lists every pair of terms of one election, of different holders,
// that share time. Terms that only touch do not overlap.
func Overlaps(ivs []Interval) []Overlap {
	var out []Overlap
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.Election != b.Election || a.Holder == b.Holder {
				continue
			}
			start, stop := max(a.Start, b.Start), min(a.Stop, b.Stop)
			if stop > start {
				out = append(out, Overlap{Election: a.Election, A: a.Holder, B: b.Holder, At: start, Duration: stop.Sub(start)})
			}
		}
	}
	return out
}

// Gap is a stretch of time in which no holder of an election ran.
type Gap struct {
	Election   string
	Start, End Mono
}

// Duration is the length of the gap.
func (g Gap) Duration() time.Duration { return g.End.Sub(g.Start) }

// Gaps lists, for election, the stretches between its first term's start
// and until in which no term ran. A gap still open at until ends there.
func Gaps(ivs []Interval, election string, until Mono) []Gap {
	var terms []Interval
	for _, iv := range ivs {
		if iv.Election == election && iv.Start < until {
			terms = append(terms, iv)
		}
	}
	if len(terms) == 0 {
		return nil
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i].Start < terms[j].Start })
	var gaps []Gap
	covered := terms[0].Stop
	for _, iv := range terms[1:] {
		if iv.Start > covered {
			gaps = append(gaps, Gap{Election: election, Start: covered, End: iv.Start})
		}
		covered = max(covered, iv.Stop)
	}
	if covered < until {
		gaps = append(gaps, Gap{Election: election, Start: covered, End: until})
	}
	return gaps
}
