package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// Env is the API server the benchmarks run against.
type Env struct {
	Config *rest.Config
	Client kubernetes.Interface
	// Kubeconfig is a file, for replica processes, that reaches the same
	// API server as Config.
	Kubeconfig string
	cluster    *testcluster.Cluster
	dir        string
}

// CoordinatedAPIServerFlags turn on coordinated leader election
// (LeaseCandidates and the API server's leader-election controller).
var CoordinatedAPIServerFlags = []string{
	"--feature-gates=CoordinatedLeaderElection=true",
	"--runtime-config=coordination.k8s.io/v1beta1=true",
}

// StartEnv starts a fresh etcd and kube-apiserver on 127.0.0.1, with
// apiServerFlags added to kube-apiserver's command line.
func StartEnv(apiServerFlags ...string) (*Env, error) {
	quietKlog()
	c, err := testcluster.Start(testcluster.Options{APIServerFlags: apiServerFlags})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "meshd-bench-")
	if err != nil {
		c.Stop()
		return nil, err
	}
	e := &Env{Config: c.Config, Client: c.Client, cluster: c, dir: dir, Kubeconfig: dir + "/kubeconfig"}
	if err := c.WriteKubeconfig(e.Kubeconfig); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// Stop stops the control plane and removes temporary files.
func (e *Env) Stop() error {
	os.RemoveAll(e.dir)
	return e.cluster.Stop()
}

// NewNamespace creates a namespace named after prefix with a random
// suffix. Namespaces are never deleted: the whole control plane is.
func (e *Env) NewNamespace(ctx context.Context, prefix string) (string, error) {
	ns, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return ns.Name, nil
}

// Machine describes where the benchmarks ran.
type Machine struct {
	CPUs      int
	CPUModel  string
	GoVersion string
	OS        string
	APIServer string
	Date      time.Time
}

// DescribeMachine collects what the report says about the machine.
func (e *Env) DescribeMachine() Machine {
	m := Machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  cpuModel(),
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
		APIServer: "unknown",
		Date:      time.Now().UTC(),
	}
	if v, err := e.Client.Discovery().ServerVersion(); err == nil {
		m.APIServer = v.GitVersion
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// newClient builds a clientset whose requests c counts.
func newClient(cfg *rest.Config, c *Counter) (kubernetes.Interface, error) {
	client, err := kubernetes.NewForConfig(c.Config(cfg))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return client, nil
}
