package kubetest

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// CountVerbs counts the clientset's recorded requests for resource by verb.
func CountVerbs(c *fake.Clientset, resource string) map[string]int {
	out := map[string]int{}
	for _, a := range c.Actions() {
		if a.GetResource().Resource == resource {
			out[a.GetVerb()]++
		}
	}
	return out
}

// WaitForVerbs waits up to ten seconds until the clientset's requests for
// resource, counted by verb, are exactly want, and fails the test with the
// last counts otherwise.
//
// An informer reports itself synced once its list is in, before its watch
// is open, so a test that counts watches right after a sync races the
// watch. Counts only grow: a request too many never matches, and fails.
func WaitForVerbs(t testing.TB, c *fake.Clientset, resource string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := CountVerbs(c, resource); fmt.Sprint(got) != fmt.Sprint(want); got = CountVerbs(c, resource) {
		if time.Now().After(deadline) {
			t.Fatalf("requests for %s: %v, want %v", resource, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}
