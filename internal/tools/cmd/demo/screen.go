package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// screen prints the story. On a terminal it keeps a live table pinned below
// the story's lines and redraws it a few times a second; story lines scroll
// above it. Anywhere else (a pipe, a CI log) it prints story lines as they
// come and the table only when snapshot is called.
type screen struct {
	out   io.Writer
	live  bool
	start time.Time
	table func() []string

	mu     sync.Mutex
	drawn  int // lines of the live table currently on the terminal
	done   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
}

const refreshEvery = 200 * time.Millisecond

func newScreen(out *os.File, plain bool, table func() []string) *screen {
	s := &screen{out: out, live: !plain && isTerminal(out), start: time.Now(), table: table, done: make(chan struct{})}
	if s.live {
		fmt.Fprint(s.out, "\x1b[?25l") // hide the cursor while redrawing
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(refreshEvery)
			defer t.Stop()
			for {
				select {
				case <-s.done:
					return
				case <-t.C:
					s.mu.Lock()
					s.redraw()
					s.mu.Unlock()
				}
			}
		}()
	}
	return s
}

// elapsed is the prefix of story lines: time since the demo started.
func (s *screen) elapsed() string {
	return fmt.Sprintf("[%5.1fs]", time.Since(s.start).Seconds())
}

// say prints one story line.
func (s *screen) say(format string, args ...any) {
	s.print(s.elapsed() + " " + fmt.Sprintf(format, args...))
}

// note prints an indented line without a timestamp.
func (s *screen) note(format string, args ...any) {
	s.print("         " + fmt.Sprintf(format, args...))
}

// heading prints a step title.
func (s *screen) heading(format string, args ...any) {
	title := fmt.Sprintf(format, args...)
	s.print("\n" + title + "\n" + strings.Repeat("-", utf8.RuneCountInString(title)))
}

func (s *screen) print(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erase()
	fmt.Fprintln(s.out, text)
	s.redraw()
}

// snapshot prints the table once, for output that is not a terminal. On a
// terminal the live table already shows it.
func (s *screen) snapshot() {
	if s.live {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, line := range s.table() {
		fmt.Fprintln(s.out, "  "+line)
	}
}

// close stops the live table and leaves its last state printed for good;
// later output is plain. It may be called more than once.
func (s *screen) close() {
	s.closed.Do(func() {
		if !s.live {
			return
		}
		close(s.done)
		s.wg.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.redraw()
		s.drawn = 0
		s.live = false
		fmt.Fprint(s.out, "\x1b[?25h")
	})
}

// erase removes the live table; the cursor ends where it began.
func (s *screen) erase() {
	if !s.live || s.drawn == 0 {
		return
	}
	fmt.Fprintf(s.out, "\x1b[%dA\r\x1b[J", s.drawn)
	s.drawn = 0
}

// redraw replaces the live table with a fresh one. Lines are cut to the
// terminal's width so that none wraps, which would throw off erase.
func (s *screen) redraw() {
	if !s.live {
		return
	}
	s.erase()
	width := terminalWidth(s.out)
	lines := s.table()
	var b strings.Builder
	b.WriteString("\n")
	for _, line := range lines {
		b.WriteString(truncate("  "+line, width-1))
		b.WriteString("\n")
	}
	fmt.Fprint(s.out, b.String())
	s.drawn = len(lines) + 1
}

func truncate(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width])
}
