package sim

import (
	"fmt"
	"sort"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TraceElectors makes every candidate's elector log (info and above) into
// the trace of its schedule. It slows a run down and is meant for replaying
// one seed (-sim.v).
var TraceElectors bool

// journalCore is a zap core that writes each entry as one trace line.
type journalCore struct {
	zapcore.LevelEnabler
	j      *journal
	fields []zapcore.Field
}

// electorLogger returns the logger for candidate id's elector: a no-op
// logger unless TraceElectors is set.
func (w *World) electorLogger(id string) *zap.Logger {
	if !TraceElectors {
		return zap.NewNop()
	}
	return zap.New(&journalCore{LevelEnabler: zapcore.InfoLevel, j: w.j}).Named(id)
}

func (c *journalCore) With(fields []zapcore.Field) zapcore.Core {
	return &journalCore{LevelEnabler: c.LevelEnabler, j: c.j, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *journalCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write renders the entry's message and its fields, except the ones every
// entry of an elector carries.
func (c *journalCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(append([]zapcore.Field(nil), c.fields...), fields...) {
		switch f.Key {
		case "election", "lock", "identity", "stack":
			continue
		}
		f.AddTo(enc)
	}
	parts := make([]string, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	c.j.logf("  [%s] %s %s", e.LoggerName, e.Message, strings.Join(parts, " "))
	return nil
}

func (c *journalCore) Sync() error { return nil }
