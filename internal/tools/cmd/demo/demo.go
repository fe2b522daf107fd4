package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Names the story uses.
const (
	// The locks of the three elections every meshd process runs.
	namespaceLock = election.NamespaceController // ConfigMap, prioritized, remote-aware
	statusLock    = status.ElectionID            // Lease, prioritized
	revisionLock  = revision.ElectionID

	// statusConfigMap is written by the status controller of whoever leads
	// the status election.
	statusConfigMap = "meshd-status"

	revisionLabel = revisions.DefaultRevisionLabel
)

// perRevisionLock is the Lease of the per-revision election of rev.
func perRevisionLock(rev string) string { return revisionLock + "-" + rev }

// webhookName is the object whose label names the default revision.
func webhookName(namespace string) string {
	if namespace == "istio-system" {
		return "istio-revision-tag-default"
	}
	return "istio-revision-tag-default-" + namespace
}

// member is one meshd instance of the demo's mesh.
type member struct {
	name     string
	revision string
	remote   bool

	mu        sync.Mutex
	proc      *meshdproc.Process // nil until started
	state     string             // shown in the table when the process is not running
	elections []monitoring.Election
	pollErr   error
}

func (m *member) process() *meshdproc.Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

func (m *member) setState(s string) {
	m.mu.Lock()
	m.state = s
	m.mu.Unlock()
}

// leads returns the short names of the elections m says it leads.
func (m *member) leads() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, s := range m.elections {
		if s.Leader {
			out = append(out, shortName(s.Name))
		}
	}
	return out
}

// shortName is how the table refers to an election.
func shortName(lockName string) string {
	switch {
	case lockName == namespaceLock:
		return "namespace"
	case lockName == statusLock:
		return "status"
	case strings.HasPrefix(lockName, revisionLock+"-"):
		return "revision"
	}
	return lockName
}

// demo holds everything the demo started.
type demo struct {
	opts options
	ctx  context.Context
	scr  *screen

	cluster    *testcluster.Cluster
	client     kubernetes.Interface
	dir        string // kubeconfig and meshd logs
	kubeconfig string
	locks      *lockWatcher
	stopWatch  context.CancelFunc
	pollDone   chan struct{}

	order   []*member // table order
	procs   map[string]*member
	mu      sync.Mutex
	def     string // the default revision as last set
	results []result
}

// result is one measured handover for the summary: from the event that
// caused it until the lock record named the new holder, and until the new
// holder said it leads.
type result struct {
	step, election, change string
	lock, leads, target    time.Duration
}

// The mesh: two revisions, one stable instance serving a remote cluster.
var mesh = []struct {
	name, revision string
	remote         bool
}{
	{"canary-1", "canary", false},
	{"stable-1", "stable", false},
	{"stable-2", "stable", false},
	{"stable-remote-1", "stable", true},
}

func (d *demo) setup() error {
	for _, m := range mesh {
		mb := &member{name: m.name, revision: m.revision, remote: m.remote, state: "not started"}
		d.order = append(d.order, mb)
		d.procs[m.name] = mb
	}

	var err error
	if d.dir, err = os.MkdirTemp("", "meshd-demo-"); err != nil {
		return err
	}
	d.kubeconfig = filepath.Join(d.dir, "kubeconfig")

	d.scr.say("starting a local control plane: etcd and kube-apiserver on 127.0.0.1")
	start := time.Now()
	started := make(chan error, 1)
	go func() {
		c, err := testcluster.Start(testcluster.Options{})
		d.mu.Lock()
		d.cluster = c
		d.mu.Unlock()
		started <- err
	}()
	select {
	case err = <-started:
	case <-d.ctx.Done():
		// Start cannot be interrupted; wait for it so cleanup can stop it.
		err = <-started
		if err == nil {
			err = d.ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	d.client = d.cluster.Client
	if err := d.cluster.WriteKubeconfig(d.kubeconfig); err != nil {
		return err
	}
	d.scr.say("control plane ready at %s in %v", d.cluster.Host(), time.Since(start).Round(100*time.Millisecond))

	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	nss := []struct{ name, rev string }{{d.opts.namespace, ""}, {"shop", "stable"}, {"payments", "canary"}}
	for _, ns := range nss {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name}}
		if ns.rev != "" {
			obj.Labels = map[string]string{revisionLabel: ns.rev}
		}
		if _, err := d.client.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.name, err)
		}
	}
	// The tag webhook exists but carries no revision label yet: no default.
	wh := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookName(d.opts.namespace)}}
	if _, err := d.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, wh, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the default-revision webhook: %w", err)
	}
	d.scr.say("created namespaces %s, shop (%s=stable), payments (%s=canary), and the webhook %s without a %s label",
		d.opts.namespace, revisionLabel, revisionLabel, wh.Name, revisionLabel)

	locks, err := newLockWatcher(d.client, d.opts.namespace)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.locks = locks // the live table reads it concurrently
	d.mu.Unlock()
	watchCtx, stopWatch := context.WithCancel(context.Background())
	d.stopWatch = stopWatch
	if err := d.locks.start(watchCtx); err != nil {
		return err
	}
	d.pollDone = make(chan struct{})
	go d.pollElections(watchCtx)
	return nil
}

// start launches a member of the mesh and waits until it is ready.
func (d *demo) start(names ...string) error {
	for _, name := range names {
		m := d.procs[name]
		opts := meshdproc.Options{
			Binary:     d.opts.meshd,
			Name:       m.name,
			Kubeconfig: d.kubeconfig,
			Namespace:  d.opts.namespace,
			Revision:   m.revision,
			Remote:     m.remote,
			TTL:        d.opts.ttl,
			LogDir:     filepath.Join(d.dir, "logs"),
			// The demo's control plane has no mesh CA: mint a root.
			SelfSignedRoot: true,
		}
		if p := m.process(); p == nil {
			p, err := meshdproc.Start(opts)
			if err != nil {
				return err
			}
			m.mu.Lock()
			m.proc = p
			m.mu.Unlock()
		} else if err := p.Restart(); err != nil {
			return err
		}
		m.setState("starting")
	}
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	for _, name := range names {
		m := d.procs[name]
		p := m.process()
		if err := p.WaitReady(ctx); err != nil {
			return err
		}
		m.setState("ready")
		where := "local"
		if m.remote {
			where = "remote"
		}
		d.scr.say("started %-15s revision %s, %s, pid %d, monitoring on %s", m.name, m.revision, where, p.Pid(), p.Addr())
	}
	return nil
}

// pollElections asks every running member for its /debug/elections a few
// times a second, for the table.
func (d *demo) pollElections(ctx context.Context) {
	defer close(d.pollDone)
	t := time.NewTicker(150 * time.Millisecond)
	defer t.Stop()
	for {
		d.pollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pollOnce refreshes what every member says it leads.
func (d *demo) pollOnce(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range d.members() {
		p := m.process()
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				st  []monitoring.Election
				err error
			)
			if p.Running() {
				qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				st, err = p.Elections(qctx)
				cancel()
			}
			m.mu.Lock()
			m.elections, m.pollErr = st, err
			m.mu.Unlock()
		}()
	}
	wg.Wait()
}

// names returns the names of every member.
func (d *demo) names() []string {
	var out []string
	for _, m := range d.members() {
		out = append(out, m.name)
	}
	return out
}

func (d *demo) members() []*member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.order)
}

// setDefault sets the revision label of the webhook and returns when the
// write was sent (the start of every handover it causes).
func (d *demo) setDefault(rev string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	whs := d.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	wh, err := whs.Get(ctx, webhookName(d.opts.namespace), metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if wh.Labels == nil {
		wh.Labels = map[string]string{}
	}
	wh.Labels[revisionLabel] = rev
	sent := time.Now()
	if _, err := whs.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		return time.Time{}, fmt.Errorf("set the default revision: %w", err)
	}
	d.mu.Lock()
	d.def = rev
	d.mu.Unlock()
	return sent, nil
}

func (d *demo) record(r result) {
	d.mu.Lock()
	d.results = append(d.results, r)
	d.mu.Unlock()
}

// cleanup stops the meshd processes, the watch and the control plane, and
// removes the demo's files. After a failure it first prints the end of every
// meshd log.
func (d *demo) cleanup(failed bool) error {
	d.scr.close()
	var errs []error
	if failed {
		for _, m := range d.members() {
			if p := m.process(); p != nil {
				fmt.Fprintf(os.Stderr, "\n--- last lines of %s's log (%s) ---\n%s\n", m.name, p.LogPath(), p.LogTail(15))
			}
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, m := range d.members() {
		p := m.process()
		if p == nil || !p.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Stop(5 * time.Second); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop %s: %w", m.name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if d.stopWatch != nil {
		d.stopWatch()
		<-d.pollDone
		d.locks.stop()
	}
	d.mu.Lock()
	cluster := d.cluster
	d.mu.Unlock()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop the control plane: %w", err))
		}
	}
	if d.dir != "" {
		if d.opts.keep {
			fmt.Printf("kept the kubeconfig and the meshd logs in %s\n", d.dir)
		} else if err := os.RemoveAll(d.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		fmt.Println("stopped every meshd process and the control plane; removed the demo's files")
	}
	return errlist.Join(errs...)
}
