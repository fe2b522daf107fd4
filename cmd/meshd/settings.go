package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshd-io/meshd/internal/daemon"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
)

// settingsError lists every invalid flag and environment variable of a
// command line, so that one run shows them all.
type settingsError struct{ problems []string }

func (e *settingsError) Error() string {
	if len(e.problems) == 1 {
		return "invalid setting: " + e.problems[0]
	}
	return fmt.Sprintf("%d invalid settings:\n  - %s", len(e.problems), strings.Join(e.problems, "\n  - "))
}

// settingsCheck collects problems with settings.
type settingsCheck struct{ problems []string }

func (c *settingsCheck) addf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// add records err, if not nil, in its own words.
func (c *settingsCheck) add(err error) {
	if err != nil {
		c.problems = append(c.problems, err.Error())
	}
}

// dnsLabel checks that flag's value is a DNS-1123 label, as namespaces and
// revisions must be.
func (c *settingsCheck) dnsLabel(flag, value string) {
	if msgs := validation.IsDNS1123Label(value); len(msgs) > 0 {
		c.addf("%s %q: not a DNS label: use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", flag, value)
	}
}

// kubeconfig checks that an explicit kubeconfig file can be read.
func (c *settingsCheck) kubeconfig(path string) {
	if path == "" {
		return
	}
	if _, err := os.Stat(path); err != nil {
		c.addf("--kubeconfig %q: %v", path, unwrapPathError(err))
	}
}

// err returns the problems as one error, nil when there are none.
func (c *settingsCheck) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return &settingsError{problems: c.problems}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// check validates every setting of "meshd run", flags and environment
// variables alike, before anything talks to the cluster. envErr is what
// applying the environment bindings reported. It returns the selected
// controllers.
func (o *runOptions) check(envErr error) ([]daemon.Kind, error) {
	var c settingsCheck
	var list *multierror.Error
	if errors.As(envErr, &list) {
		for _, e := range list.Errors {
			c.add(e)
		}
	} else {
		c.add(envErr)
	}
	c.dnsLabel("--namespace", o.kube.namespace)
	c.dnsLabel("--revision", o.revision)
	c.kubeconfig(o.kube.kubeconfig)
	if msgs := validation.IsConfigMapKey(o.clusterID); len(msgs) > 0 {
		c.addf("--cluster-id %q: not a valid cluster ID (a Secret data key): %s", o.clusterID, strings.Join(msgs, "; "))
	}
	if o.externalCP && !o.multicluster {
		c.addf("--external-control-plane applies only with --multicluster")
	}
	if strings.TrimSpace(o.identity) != o.identity {
		c.addf("--identity %q: must not start or end with white space", o.identity)
	}
	switch {
	case o.ttl < 0:
		c.addf("--ttl %v: must not be negative", o.ttl)
	case (o.ttl > 0 || o.ttlSet) && o.ttl < time.Second:
		// A given 0 is refused like 500ms, not taken as "the default":
		// leaving the flag out is how to ask for the default.
		c.addf("--ttl %v: must be at least 1s (leave --ttl out for the default)", o.ttl)
	}
	if _, err := election.ParseMode(o.electionMode); err != nil {
		c.addf("--election-mode: %v", err)
	}
	kinds, err := daemon.ParseKinds(o.controllers)
	if err != nil {
		c.addf("--controllers %q: %v", o.controllers, err)
	}
	if o.multicluster && err == nil && !slices.Contains(kinds, daemon.KindNamespace) {
		c.addf("--multicluster needs the namespace controller (--controllers %q)", o.controllers)
	}
	if _, err := zapcore.ParseLevel(o.logLevel); err != nil {
		c.addf("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	if o.logFormat != logFormatJSON && o.logFormat != logFormatConsole {
		c.addf("--log-format %q: want %s or %s", o.logFormat, logFormatJSON, logFormatConsole)
	}
	if _, _, err := net.SplitHostPort(o.monitoringAddress); err != nil {
		c.addf("--monitoring-address %q: want host:port or :port", o.monitoringAddress)
	}
	for _, p := range featureProblems() {
		c.add(p)
	}
	return kinds, c.err()
}

// featureProblems returns one error per invalid environment variable of the
// features registry, read with the registry's own warnings silenced.
func featureProblems() []error {
	features.Default().SetLogger(zap.NewNop())
	defer features.Default().SetLogger(nil)
	err := features.Default().Validate()
	if err == nil {
		return nil
	}
	var list *multierror.Error
	if errors.As(err, &list) {
		return list.Errors
	}
	return []error{err}
}
