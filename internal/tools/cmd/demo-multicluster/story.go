package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockstatus"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
)

const lockName = election.NamespaceController

// site is one cluster of the demo and its meshd.
type site struct {
	id         string
	c          *testcluster.Cluster
	kubeconfig string // file, for meshd --kubeconfig
	proc       *meshdproc.Process
}

type demo struct {
	o       options
	ctx     context.Context
	dir     string
	sites   []*site // east, west
	timings []string
	step    int
}

func runDemo(ctx context.Context, o options) (err error) {
	d := &demo{o: o, ctx: ctx}
	if d.dir, err = os.MkdirTemp("", "meshd-demo-multicluster-"); err != nil {
		return err
	}
	defer func() {
		if o.keep {
			fmt.Printf("\nkubeconfigs and logs kept in %s\n", d.dir)
		} else {
			os.RemoveAll(d.dir)
		}
	}()

	fmt.Println("Starting two local control planes (etcd + kube-apiserver each, on 127.0.0.1)...")
	start := time.Now()
	clusters, err := testcluster.StartSeveral(2, testcluster.Options{})
	if err != nil {
		return err
	}
	defer testcluster.StopAll(clusters)
	fmt.Printf("  east at %s, west at %s, ready in %v\n", clusters[0].Host(), clusters[1].Host(), time.Since(start).Round(100*time.Millisecond))
	east, west := &site{id: "east", c: clusters[0]}, &site{id: "west", c: clusters[1]}
	d.sites = []*site{east, west}
	defer d.stopAll()
	if err := d.setUp(); err != nil {
		return err
	}

	d.chapter("west's meshd starts first: it leads both clusters, east's with a remote key")
	if err := d.start(west); err != nil {
		return err
	}
	if err := d.waitLeader(west, "meshd-west", "default", 15*time.Second); err != nil {
		return err
	}
	if err := d.waitLeader(east, "meshd-west", "^default", 15*time.Second); err != nil {
		return err
	}
	if err := d.waitRoot(east, "default", 15*time.Second); err != nil {
		return err
	}
	fmt.Println("  the remote instance publishes the mesh root into east (namespace default holds it)")
	d.table()

	d.chapter("east's meshd starts: the local instance takes its own cluster")
	began := time.Now()
	if err := d.start(east); err != nil {
		return err
	}
	if err := d.waitLeader(east, "meshd-east", "default", 15*time.Second); err != nil {
		return err
	}
	d.timed("east taken from the remote instance, after east's meshd started", time.Since(began))
	d.table()

	d.chapter("east's meshd is killed (SIGKILL): west's takes east over when the lease runs out")
	began = time.Now()
	if err := east.proc.Kill(); err != nil {
		return err
	}
	if err := d.waitLeader(east, "meshd-west", "^default", 3*d.o.ttl+5*time.Second); err != nil {
		return err
	}
	d.timed(fmt.Sprintf("east failed over to the remote instance, after the kill (lease %v)", d.o.ttl), time.Since(began))
	d.table()

	d.chapter("east's meshd comes back and takes its cluster back")
	began = time.Now()
	if err := east.proc.Restart(); err != nil {
		return err
	}
	if err := d.waitLeader(east, "meshd-east", "default", 15*time.Second); err != nil {
		return err
	}
	d.timed("east taken back by its local instance, after the restart", time.Since(began))
	d.table()

	d.chapter("both stop with SIGTERM: every lock of both clusters is released")
	for _, s := range d.sites {
		if err := s.proc.Signal(syscall.SIGTERM); err != nil {
			return err
		}
	}
	for _, s := range d.sites {
		if err := s.proc.Wait(10 * time.Second); err != nil {
			return fmt.Errorf("%s's meshd after SIGTERM: %v", s.id, err)
		}
	}
	for _, s := range d.sites {
		l, err := d.lock(s)
		if err != nil {
			return err
		}
		if l.Holder != "" {
			return fmt.Errorf("%s: the lock still names %q after a graceful stop", s.id, l.Holder)
		}
	}
	d.table()

	fmt.Println("\nSummary")
	for _, t := range d.timings {
		fmt.Println("  " + t)
	}
	return nil
}

// setUp creates the mesh namespace and a shared root in both clusters, and
// gives each the other's kubeconfig Secret.
func (d *demo) setUp() error {
	root, err := newRoot()
	if err != nil {
		return err
	}
	for _, s := range d.sites {
		s.kubeconfig = filepath.Join(d.dir, s.id+".kubeconfig")
		if err := s.c.WriteKubeconfig(s.kubeconfig); err != nil {
			return err
		}
		if _, err := s.c.Client.CoreV1().Namespaces().Create(d.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.o.namespace}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		// A root shared by both clusters, plugged in as cacerts: what a
		// multi-primary mesh needs for cross-cluster mTLS.
		if _, err := s.c.Client.CoreV1().Secrets(d.o.namespace).Create(d.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cacerts"},
			Data: map[string][]byte{"root-cert.pem": []byte(root)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i, s := range d.sites {
		other := d.sites[1-i]
		kc, err := other.c.Kubeconfig()
		if err != nil {
			return err
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "istio-remote-secret-" + other.id,
			Labels: map[string]string{multicluster.SecretLabel: "true"}}, Data: map[string][]byte{other.id: kc}}
		if _, err := s.c.Client.CoreV1().Secrets(d.o.namespace).Create(d.ctx, secret, metav1.CreateOptions{}); err != nil {
			return err
		}
		fmt.Printf("  %s: namespace %s, Secret cacerts (the shared root), Secret %s (key %q: %s's kubeconfig)\n",
			s.id, d.o.namespace, secret.Name, other.id, other.id)
	}
	return nil
}

// start runs s's meshd and waits until it is ready.
func (d *demo) start(s *site) error {
	if s.proc == nil {
		p, err := meshdproc.Start(meshdproc.Options{
			Binary:      d.o.meshd,
			Name:        "meshd-" + s.id,
			Kubeconfig:  s.kubeconfig,
			Namespace:   d.o.namespace,
			TTL:         d.o.ttl,
			Controllers: "namespace",
			LogDir:      filepath.Join(d.dir, "logs"),
			Args:        []string{"--cluster-id=" + s.id, "--multicluster"},
		})
		if err != nil {
			return err
		}
		s.proc = p
	}
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	return s.proc.WaitReady(ctx)
}

func (d *demo) stopAll() {
	for _, s := range d.sites {
		if s.proc != nil {
			_ = s.proc.Stop(5 * time.Second)
		}
	}
}

func (d *demo) chapter(title string) {
	d.step++
	fmt.Printf("\n%d. %s\n", d.step, title)
}

func (d *demo) timed(what string, took time.Duration) {
	line := fmt.Sprintf("%-72s %v", what, took.Round(time.Millisecond))
	fmt.Println("  " + line)
	d.timings = append(d.timings, line)
}

func (d *demo) lock(s *site) (lockstatus.Lock, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
	defer cancel()
	locks, err := lockstatus.List(ctx, s.c.Client, d.o.namespace)
	if err != nil {
		return lockstatus.Lock{}, err
	}
	for _, l := range locks {
		if l.Election == lockName {
			return l, nil
		}
	}
	return lockstatus.Lock{}, nil
}

// leaders returns the meshd processes that say they lead s's lock.
func (d *demo) leaders(s *site) []string {
	var out []string
	for _, p := range d.sites {
		if p.proc == nil || !p.proc.Running() {
			continue
		}
		ctx, cancel := context.WithTimeout(d.ctx, 2*time.Second)
		es, err := p.proc.Elections(ctx)
		cancel()
		if err != nil {
			continue
		}
		for _, e := range es {
			if e.Cluster == s.id && e.Name == lockName && e.Leader {
				out = append(out, p.proc.Name())
			}
		}
	}
	return out
}

// waitLeader waits until who alone leads s's lock with key.
func (d *demo) waitLeader(s *site, who, key string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := d.lock(s)
		ls := d.leaders(s)
		if err == nil && l.Holder == who && l.HolderKey == key && len(ls) == 1 && ls[0] == who {
			return nil
		}
		if d.ctx.Err() != nil {
			return d.ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not lead with key %q within %v (lock holder %q key %q, leaders %v, err %v)",
				s.id, who, key, timeout, l.Holder, l.HolderKey, ls, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRoot waits until namespace ns of s holds the mesh root.
func (d *demo) waitRoot(s *site, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cm, err := s.c.Client.CoreV1().ConfigMaps(ns).Get(d.ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err == nil && strings.Contains(cm.Data["root-cert.pem"], "BEGIN CERTIFICATE") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: namespace %s holds no root after %v (err %v)", s.id, ns, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// table prints who holds each cluster's lock, and who says it leads it.
func (d *demo) table() {
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tLOCK HOLDER\tKEY\tLEADS (per /debug/elections)")
	for _, s := range d.sites {
		l, err := d.lock(s)
		holder := l.Holder
		if err != nil {
			holder = "(" + err.Error() + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.id, dash(holder), dash(l.HolderKey), dash(strings.Join(d.leaders(s), ",")))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newRoot() (string, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "demo mesh root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return "", fmt.Errorf("create the demo root: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
}
