package meshdproc

import (
	"bytes"
	"io"
	"os"
)

// AnyPort is the --monitoring-address the harnesses pass: the kernel picks a
// free port when meshd binds, so no other process can take it between the
// choice and the bind, and the harness reads the port back from the log
// (MonitoringAddress). A port chosen in advance by the harness loses that race
// now and then when many tests run at once.
const AnyPort = "127.0.0.1:0"

// runningMessage is the info line meshd writes once its monitoring listener
// is bound; it carries the bound address in its "monitoring" field.
const runningMessage = "meshd running"

// MonitoringAddress returns the monitoring address of the last
// "meshd running" line in log, and false if there is none yet. It reads
// both log formats (json and console), and needs the log level to be info
// or lower.
func MonitoringAddress(log []byte) (string, bool) {
	const field = `"monitoring":`
	for len(log) > 0 {
		i := bytes.LastIndexByte(log[:len(log)-1], '\n')
		line := log[i+1:]
		log = log[:i+1]
		if i < 0 {
			log = nil
		}
		if !bytes.Contains(line, []byte(runningMessage)) {
			continue
		}
		j := bytes.Index(line, []byte(field))
		if j < 0 {
			continue
		}
		rest := bytes.TrimLeft(line[j+len(field):], " ")
		if len(rest) == 0 || rest[0] != '"' {
			continue
		}
		rest = rest[1:]
		end := bytes.IndexByte(rest, '"')
		if end <= 0 {
			continue
		}
		return string(rest[:end]), true
	}
	return "", false
}

// MonitoringAddressInFile is MonitoringAddress over the part of the file at
// path from offset on (a log that collects several runs is read from where
// the current run began).
func MonitoringAddressInFile(path string, offset int64) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "", false
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return "", false
	}
	return MonitoringAddress(b)
}
