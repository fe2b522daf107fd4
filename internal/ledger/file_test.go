package ledger

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFilesMergeAcrossWriters(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenFile(filepath.Join(dir, "a.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenFile(filepath.Join(dir, "b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Wrap("e", "a", func(ctx context.Context) { <-ctx.Done() })(ctx)
	}()
	time.Sleep(20 * time.Millisecond)
	// b starts while a still runs: 10ms of overlap.
	b.Wrap("e", "b", func(context.Context) { time.Sleep(10 * time.Millisecond) })(context.Background())
	cancel()
	<-done
	// A start without a stop (a killed process) runs until the last record.
	b.Wrap("e", "c", func(context.Context) {})(context.Background())
	a.Close()
	b.Close()
	if err := os.WriteFile(filepath.Join(dir, "c.jsonl"), []byte(`{"id":"x","event":"start","election":"e","holder":"killed","mono":1}`+"\n{broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ReadFiles(filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl"), filepath.Join(dir, "c.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.Intervals()); n != 4 {
		t.Fatalf("intervals = %d, want 4", n)
	}
	var ab time.Duration
	for _, o := range l.Overlaps() {
		if (o.A == "a" && o.B == "b") || (o.A == "b" && o.B == "a") {
			ab = o.Duration
		}
	}
	if ab < 10*time.Millisecond || ab > time.Second {
		t.Fatalf("a/b overlap = %v, want about 10ms", ab)
	}
	if l.Starts("e") != 4 {
		t.Fatalf("starts = %d", l.Starts("e"))
	}
}
