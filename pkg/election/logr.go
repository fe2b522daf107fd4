package election

import (
	"errors"
	"slices"
	"sort"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WithLogr sets the logger as a logr.Logger, for programs that log through
// logr (controller-runtime, klog): the election's zap logging is passed on
// to it. Debug messages go to V(1), info and warnings to V(0), errors to
// Error; fields become key/value pairs and the logger's name a "logger"
// key. WithLogger, with zap, is the direct way and the default.
func WithLogr(l logr.Logger) Option {
	return func(o *options) { o.logger = zap.New(&logrCore{sink: l}); o.mark("WithLogr") }
}

// logrCore is a zapcore.Core that writes to a logr.Logger.
type logrCore struct {
	sink   logr.Logger
	fields []zapcore.Field // added by With
}

// verbosity maps a zap level to logr's V level.
func verbosity(l zapcore.Level) int {
	if l < zapcore.InfoLevel {
		return 1
	}
	return 0
}

func (c *logrCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.ErrorLevel || c.sink.V(verbosity(l)).Enabled()
}

func (c *logrCore) With(fields []zapcore.Field) zapcore.Core {
	return &logrCore{sink: c.sink, fields: append(slices.Clone(c.fields), fields...)}
}

func (c *logrCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *logrCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	var err error
	if msg, ok := enc.Fields["error"].(string); ok && e.Level >= zapcore.ErrorLevel {
		err = errors.New(msg)
		delete(enc.Fields, "error")
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]any, 0, 2*len(keys)+2)
	if e.LoggerName != "" {
		kv = append(kv, "logger", e.LoggerName)
	}
	for _, k := range keys {
		kv = append(kv, k, enc.Fields[k])
	}
	if e.Level >= zapcore.ErrorLevel {
		c.sink.Error(err, e.Message, kv...)
		return nil
	}
	c.sink.V(verbosity(e.Level)).Info(e.Message, kv...)
	return nil
}

func (c *logrCore) Sync() error { return nil }
