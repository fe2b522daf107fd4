// Package electionlog names the logger of one candidate of one election,
// the same way in the elector core and in each protocol, so that their
// entries carry the same fields.
package electionlog

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Lock is what the logger names of a lock.
type Lock interface {
	Identity() string
	Describe() string
}

// For returns l with the fields "election", "lock" and "identity"; a nop
// logger when l is nil. The fields are encoded when the first entry is
// written: in a process with many elections most candidates write none at
// the enabled level, and each encoded copy costs a buffer. A logger that
// writes nothing is returned as it is.
func For(l *zap.Logger, election string, lock Lock) *zap.Logger {
	switch {
	case l == nil:
		return zap.NewNop()
	case !l.Core().Enabled(zapcore.FatalLevel):
		return l
	}
	return l.WithLazy(zap.String("election", election), zap.String("lock", lock.Describe()),
		zap.String("identity", lock.Identity()))
}
