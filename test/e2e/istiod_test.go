package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// istiodLock writes the namespace election's ConfigMap the way istiod does:
// the record as JSON in the leader annotation, times in RFC 3339 with
// second precision, next to data, labels and annotations of its own.
func (m *mesh) istiodLock(holder, key string, leaseSeconds int) {
	m.t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	record := fmt.Sprintf(`{"holderIdentity":%q,"holderKey":%q,"leaseDurationSeconds":%d,"acquireTime":%q,"renewTime":%q,"leaderTransitions":3}`,
		holder, key, leaseSeconds, now.Add(-time.Hour).Format(time.RFC3339), now.Format(time.RFC3339))
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      namespaceLock,
			Namespace: m.ns,
			Labels:    map[string]string{"app": "istiod"},
			Annotations: map[string]string{
				resourcelock.LeaderAnnotationKey: record,
				"example.com/owner":              "platform-team",
			},
		},
		Data: map[string]string{"note": "written by istiod"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cluster.Client.CoreV1().ConfigMaps(m.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		m.t.Fatal(err)
	}
}

// rfc3339Seconds matches a record time as istiod writes it.
var rfc3339Seconds = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// checkTakenOver verifies the lock after meshd took it from istiod: the
// record names the new holder in istiod's format, counts the transition,
// and everything else istiod put on the ConfigMap is still there.
func (m *mesh) checkTakenOver(holder, key string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm, err := cluster.Client.CoreV1().ConfigMaps(m.ns).Get(ctx, namespaceLock, metav1.GetOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	raw := cm.Annotations[resourcelock.LeaderAnnotationKey]
	var rec map[string]any
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		m.t.Fatalf("record %q: %v", raw, err)
	}
	for field, want := range map[string]any{"holderIdentity": holder, "holderKey": key, "leaseDurationSeconds": 2.0, "leaderTransitions": 4.0} {
		if rec[field] != want {
			m.t.Errorf("record field %s = %v, want %v (record %s)", field, rec[field], want, raw)
		}
	}
	for _, field := range []string{"acquireTime", "renewTime"} {
		if s, _ := rec[field].(string); !rfc3339Seconds.MatchString(s) {
			m.t.Errorf("record field %s = %v, want RFC 3339 with second precision", field, rec[field])
		}
	}
	if cm.Annotations["example.com/owner"] != "platform-team" || cm.Labels["app"] != "istiod" || cm.Data["note"] != "written by istiod" {
		m.t.Errorf("istiod's own annotations, labels or data were lost: %+v", cm.ObjectMeta)
	}
}

// A lock held by istiod is respected for its whole lease, counted from
// when meshd first saw it, and taken over once istiod stops renewing.
func TestIstiodLockIsRespectedUntilItExpires(t *testing.T) {
	const lease = 4 // seconds, from istiod's record
	m := newMesh(t)
	m.istiodLock("istiod-5f7c9d-x2k4p", "default", lease)

	start := time.Now()
	m.start("meshd-1", "default", withControllers("namespace"))
	// meshd saw the record at most when it became ready, so the lease runs
	// until at least start + lease. Check most of it.
	testutil.Consistently(t, time.Duration(lease)*time.Second-time.Since(start)-time.Second, func() error {
		if h := m.holder(namespaceLock); h != "istiod-5f7c9d-x2k4p" {
			return fmt.Errorf("%s taken by %q before istiod's lease ran out", namespaceLock, h)
		}
		if ls := m.leaders(namespaceLock); len(ls) > 0 {
			return fmt.Errorf("%v lead while istiod holds the lock", ls)
		}
		return nil
	})
	m.waitLeader(namespaceLock, 10*time.Second, in("meshd-1"))
	took := time.Since(start)
	t.Logf("meshd-1 took the lock %v after it was started (istiod's lease %ds)", took.Round(time.Millisecond), lease)
	if took > time.Duration(lease)*time.Second+3*time.Second {
		t.Errorf("meshd-1 took over after %v, want within the lease plus 3s", took)
	}
	m.checkTakenOver("meshd-1", "default")
}

// istiod holding the lock for a revision that is not the default is taken
// over at once by an instance of the default revision: istiod does not
// answer handover requests, so meshd does not wait for one.
func TestIstiodLowerPriorityLockIsTakenOverAtOnce(t *testing.T) {
	m := newMesh(t)
	m.istiodLock("istiod-stable-7c5b8-qq9vd", "stable", 30)
	m.setDefault("canary")

	w := m.watchLeaders([]string{namespaceLock}, in("canary-1"))
	m.start("canary-1", "canary", withControllers("namespace"))
	took := w.wait(t, 10*time.Second)[namespaceLock]
	t.Logf("canary-1 took the lock %v after it was started (istiod's lease 30s)", took.Round(time.Millisecond))
	if took > priorityBound+time.Second { // includes the process start
		t.Errorf("canary-1 took over after %v, want within %v of its start", took, priorityBound+time.Second)
	}
	m.checkTakenOver("canary-1", "canary")
}
