package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The runtime halves a goroutine's stack at a garbage collection only while
// the goroutine uses less than a quarter of it, counting from the top of
// the stack to the saved stack pointer plus stackNosplit, the room it
// keeps for functions that do not check for stack overflow. A candidate's
// goroutine grows to 8 KiB while it makes a request or logs; it goes back
// to 4 KiB only if, waiting, it uses less than 2 KiB. A thousand elections
// in one process: 4 MiB.
const (
	halvingLimit = 8192 / 4
	// stackNosplit is the runtime's reserve in a build without the race
	// detector (800 bytes; twice that with it) on linux/amd64.
	stackNosplit = 800
	// aboveOutermost is what the runtime puts between the top of a new
	// goroutine's stack and the frame of goexit, its outermost function.
	aboveOutermost = 32
)

// A waiting leader and a waiting follower use less than a quarter of an
// 8 KiB stack, whether istiod's way in (LeaderElection.Run) or a Group runs
// them, so that the runtime halves their stacks while they wait.
func TestWaitingCandidatesUseLessThanAQuarterOf8KiB(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "stackdepth")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GOTRACEBACK=system")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("stackdepth: %v, want the exit status 2 of a SIGQUIT dump\n%s", err, tail(out))
	}
	waits := waitingCandidates(string(out))
	if len(waits[leaderFrame]) != 2 || len(waits[followerFrame]) != 2 {
		t.Fatalf("found %d leaders and %d followers waiting, want 2 of each\n%s",
			len(waits[leaderFrame]), len(waits[followerFrame]), tail(out))
	}
	for frame, gs := range waits {
		for _, g := range gs {
			used := g.span + aboveOutermost + stackNosplit
			t.Logf("%s: %d bytes of frames, %d bytes in use by the runtime's count", frame, g.span, used)
			if used >= halvingLimit {
				t.Errorf("a candidate waiting in %s uses %d bytes, want under %d so that its stack can be halved to 4 KiB; its frames:\n%s",
					frame, used, halvingLimit, g.stack)
			}
		}
	}
}

// waiter is one waiting candidate's goroutine: its stack as printed, and
// the distance from its innermost frame to its outermost.
type waiter struct {
	stack string
	span  int
}

var stackPointer = regexp.MustCompile(`sp=0x([0-9a-f]+)`)

// waitingCandidates finds in a GOTRACEBACK=system dump the goroutines that
// wait in a select in leaderFrame or followerFrame.
func waitingCandidates(dump string) map[string][]waiter {
	found := map[string][]waiter{}
	for _, g := range strings.Split(dump, "\n\n") {
		if !strings.HasPrefix(g, "goroutine ") || !strings.Contains(strings.SplitN(g, "\n", 2)[0], "[select") {
			continue
		}
		var frame string
		switch {
		case strings.Contains(g, leaderFrame):
			frame = leaderFrame
		case strings.Contains(g, followerFrame):
			frame = followerFrame
		default:
			continue
		}
		lo, hi := -1, -1
		for _, m := range stackPointer.FindAllStringSubmatch(g, -1) {
			sp, err := strconv.ParseUint(m[1], 16, 64)
			if err != nil {
				continue
			}
			if lo < 0 || int(sp) < lo {
				lo = int(sp)
			}
			if int(sp) > hi {
				hi = int(sp)
			}
		}
		if lo < 0 {
			continue // no frame addresses: not a GOTRACEBACK=system dump
		}
		found[frame] = append(found[frame], waiter{stack: g, span: hi - lo})
	}
	return found
}

func tail(b []byte) string {
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
