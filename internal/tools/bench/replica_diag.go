package bench

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

// Diagnosis of scale replicas: heap and goroutine profiles, memory
// statistics and request logs (see ReplicaOptions).

// writeHeapProfile writes the live heap, as of a garbage collection made
// now, to path, and the goroutines (grouped by stack) to path.goroutines.
func writeHeapProfile(path string) error {
	runtime.GC()
	if err := writeProfile("heap", 0, path); err != nil {
		return err
	}
	return writeProfile("goroutine", 1, path+".goroutines")
}

func writeProfile(name string, debug int, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		f.Close()
		return fmt.Errorf("%s profile: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return nil
}

// appendMemStats appends the Go runtime's memory statistics and the
// process's RSS, labelled with when, to the file at path.
func appendMemStats(path, when string) error {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	u := selfUsage()
	const mib = 1 << 20
	line := fmt.Sprintf("%s: rss %.1f MiB (peak %.1f), sys %.1f, heap alloc %.1f inuse %.1f idle %.1f released %.1f, stacks %.1f, mspan %.1f, gc sys %.1f, other %.1f MiB; %d GCs, next GC at %.1f MiB, %d goroutines\n",
		when, float64(u.RSSKiB)/1024, float64(u.PeakRSSKiB)/1024, float64(m.Sys)/mib, float64(m.HeapAlloc)/mib, float64(m.HeapInuse)/mib,
		float64(m.HeapIdle)/mib, float64(m.HeapReleased)/mib, float64(m.StackSys)/mib, float64(m.MSpanSys)/mib, float64(m.GCSys)/mib,
		float64(m.OtherSys)/mib, m.NumGC, float64(m.NextGC)/mib, runtime.NumGoroutine())
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("memory statistics: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("memory statistics: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memory statistics: %w", err)
	}
	return nil
}

// traceRequests makes counter write every request to the file at path;
// the returned function closes it.
func traceRequests(counter *Counter, path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("request log: %w", err)
	}
	var mu sync.Mutex
	counter.SetTrace(func(verb string, req *http.Request) {
		line := fmt.Sprintf("%s %s %s %s\n", time.Now().Format("15:04:05.000"), verb, req.Method, req.URL.RequestURI())
		mu.Lock()
		defer mu.Unlock()
		_, _ = f.WriteString(line)
	})
	return func() {
		counter.SetTrace(nil)
		mu.Lock()
		defer mu.Unlock()
		f.Close()
	}, nil
}
