package election

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// captured is a logr sink (funcr) that keeps each line.
type captured struct {
	mu    sync.Mutex
	lines []string
}

func (c *captured) logger(verbosity int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.lines = append(c.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: verbosity})
}

func (c *captured) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// zap's levels, fields, names and errors reach a logr.Logger.
func TestLogrCore(t *testing.T) {
	var c captured
	log := zap.New(&logrCore{sink: c.logger(0)}).Named("elector").With(zap.String("election", "e1"))
	log.Debug("hidden at V(0)")
	log.Info("acquired leadership", zap.Int("transitions", 3))
	log.Warn("slow renewal")
	log.Error("renew failed", zap.Error(errors.New("conflict")))
	got := c.text()
	for _, want := range []string{
		`"msg"="acquired leadership" "logger"="elector" "election"="e1" "transitions"=3`,
		`"msg"="slow renewal"`,
		`"msg"="renew failed" "error"="conflict" "logger"="elector" "election"="e1"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("logr output lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "hidden") {
		t.Errorf("a debug message reached V(0):\n%s", got)
	}
	var v1 captured
	zap.New(&logrCore{sink: v1.logger(1)}).Debug("shown at V(1)")
	if !strings.Contains(v1.text(), "shown at V(1)") {
		t.Errorf("a debug message did not reach V(1): %q", v1.text())
	}
}

// An election given WithLogr logs through it.
func TestWithLogr(t *testing.T) {
	var c captured
	le, err := New(kubetest.NewClientset(), Spec{Namespace: "mesh", ElectionID: "my-controller-leader", Identity: "a"},
		WithLogr(c.logger(1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	le.Add(func(context.Context) error { stop(); return nil })
	if err := le.RunContext(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.text(); !strings.Contains(got, "my-controller-leader") || !strings.Contains(got, `"msg"=`) {
		t.Errorf("the election did not log through logr:\n%s", got)
	}
}
