package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// The meshd binary, given bad flags and a bad environment variable, fails
// within a second naming each of them; the variables are read once per
// process, hence a process of its own.
func TestProcessRejectsBadSettingsAtOnce(t *testing.T) {
	bin := meshdBinary(t)
	cmd := exec.Command(bin, "run", "-n", "Bad_NS", "--kubeconfig", "/nonexistent")
	cmd.Env = append(os.Environ(), "LEADER_ELECTION_TTL=soon", "POD_NAMESPACE=", "REVISION=")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1\n%s", err, out)
	}
	if took > time.Second {
		t.Errorf("took %v, want under 1s", took)
	}
	for _, want := range []string{"meshd: 3 invalid settings:", `--namespace "Bad_NS"`, `--kubeconfig "/nonexistent"`,
		`$LEADER_ELECTION_TTL="soon": not a valid duration`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("failed after %v:\n%s", took, out)
}

// TestProcessSIGTERM runs the meshd binary, checks its endpoints while it
// leads, and stops it with SIGTERM: it releases its locks and exits 0.
func TestProcessSIGTERM(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	createCASecret(t, c, ns) // a mesh's CA, for the namespace controller
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	bin := meshdBinary(t)

	var stderr syncBuffer
	cmd := exec.Command(bin, "run", "--kubeconfig", kubeconfig, "--namespace", ns, "--identity", "meshd-proc",
		"--ttl", "2s", "--monitoring-address", meshdproc.AnyPort)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, []byte, error) {
		addr, ok := meshdproc.MonitoringAddress([]byte(stderr.String()))
		if !ok {
			return 0, nil, errors.New("no monitoring address logged yet")
		}
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := func() error {
			code, body, err := get("/debug/elections")
			if err != nil {
				return err
			}
			var statuses []election.Status
			if err := json.Unmarshal(body, &statuses); err != nil || code != http.StatusOK {
				return errors.New(string(body))
			}
			if len(statuses) != 3 {
				return errors.New("not all elections listed")
			}
			for _, s := range statuses {
				if !s.Leader {
					return errors.New(s.ID + " not led")
				}
			}
			if code, body, err := get("/readyz"); err != nil || code != http.StatusOK {
				return errors.New("not ready: " + string(body))
			}
			return nil
		}()
		if err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("meshd exited early (%v):\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("meshd did not lead every election: %v\n%s", err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body, err := get("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz: %d %s %v", code, body, err)
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("meshd exited with %v after SIGTERM:\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("meshd did not exit after SIGTERM:\n%s", stderr.String())
	}
	// The bound is min(ttl, 10s) = 2s plus the monitoring server's grace.
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("shutdown took %v", took)
	}

	ctx := context.Background()
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, election.NamespaceController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey])); err != nil || rec.HolderIdentity != "" {
		t.Errorf("ConfigMap lock after SIGTERM: %+v, %v", rec, err)
	}
	for _, name := range []string{status.ElectionID, revision.ElectionID + "-default"} {
		lease, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rec := resourcelock.LeaseToRecord(lease); rec.HolderIdentity != "" {
			t.Errorf("Lease %s after SIGTERM: %+v", name, rec)
		}
	}
}

// createCASecret creates the Secret cacerts in ns holding a fresh
// self-signed root under root-cert.pem.
func createCASecret(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	root := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	_, err = c.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cacerts"}, Data: map[string][]byte{"root-cert.pem": root}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
