package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBadFlagsFailBeforeAnythingStarts: no cluster is started for flags that
// cannot work.
func TestBadFlagsFailBeforeAnythingStarts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-kinds", "kill-leader,unplug"}, "unknown fault kinds unplug"},
		{[]string{"-instances", "9"}, "Instances 9: want 3 to 5"},
		{[]string{"-ttl", "1500ms"}, "TTL 1.5s: want whole seconds"},
		{[]string{"-duration", "2h"}, "bounded to an hour"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-kinds", "delete-session"}, "fault kind delete-session needs Sessions"},
		{[]string{"-kinds", "kill-leader-reported"}, "fault kind kill-leader-reported needs Pods"},
		{[]string{"-sessions", "-election-mode", "coordinated"}, "Sessions apply to racing elections only"},
		{[]string{"-no-such-flag"}, "flag provided but not defined"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("chaos %q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
		if strings.Contains(stdout.String(), "starting kube-apiserver") {
			t.Errorf("chaos %q started a cluster", tc.args)
		}
	}
}
