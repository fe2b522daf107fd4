package meshdproc

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// runningLine is what a logger with enc writes for the daemon's
// "meshd running" message, with the field types the daemon uses.
func runningLine(enc zapcore.Encoder, port int) string {
	var buf bytes.Buffer
	log := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.InfoLevel))
	log.Info(runningMessage, zap.String("identity", "a"),
		zap.Stringer("monitoring", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}),
		zap.Strings("elections", []string{"x"}))
	return buf.String()
}

func TestMonitoringAddress(t *testing.T) {
	jsonEnc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	consoleEnc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	for _, tc := range []struct {
		name     string
		log      string
		want     string
		wantSeen bool
	}{
		{"json", runningLine(jsonEnc, 41001), "127.0.0.1:41001", true},
		{"console", runningLine(consoleEnc, 41002), "127.0.0.1:41002", true},
		{"empty", "", "", false},
		{"not yet running", "=== starting\n" + `{"msg":"starting meshd","monitoring":"127.0.0.1:9"}` + "\n", "", false},
		{"the last run wins", runningLine(jsonEnc, 41003) + "=== starting\n" + runningLine(jsonEnc, 41004), "127.0.0.1:41004", true},
		{"line without a newline", `{"msg":"meshd running","monitoring":"127.0.0.1:41005"}`, "127.0.0.1:41005", true},
		{"field not a string", `{"msg":"meshd running","monitoring":7}` + "\n", "", false},
		{"cut off", `{"msg":"meshd running","monitoring":"127.0`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MonitoringAddress([]byte(tc.log))
			if got != tc.want || ok != tc.wantSeen {
				t.Errorf("MonitoringAddress(%q) = %q, %v; want %q, %v", tc.log, got, ok, tc.want, tc.wantSeen)
			}
		})
	}
}

// TestMonitoringAddressInFileReadsFromOffset: a log shared by several runs
// is read from where the current run began, so the address of an earlier
// run is never taken for the current one's.
func TestMonitoringAddressInFileReadsFromOffset(t *testing.T) {
	jsonEnc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	path := filepath.Join(t.TempDir(), "m.log")
	first := runningLine(jsonEnc, 41010)
	if err := os.WriteFile(path, []byte(first+"=== starting again\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	offset := int64(len(first))
	if addr, ok := MonitoringAddressInFile(path, offset); ok {
		t.Fatalf("before the second run logged: got %q", addr)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(runningLine(jsonEnc, 41011)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if addr, ok := MonitoringAddressInFile(path, offset); addr != "127.0.0.1:41011" || !ok {
		t.Fatalf("got %q, %v; want the second run's address", addr, ok)
	}
	if _, ok := MonitoringAddressInFile(filepath.Join(t.TempDir(), "missing"), 0); ok {
		t.Fatal("a missing file gave an address")
	}
}
