package main

import (
	"fmt"
	"io"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// Log formats accepted by --log-format.
const (
	logFormatJSON    = "json"
	logFormatConsole = "console"
)

// newLogger builds the process logger writing to w: JSON lines for
// production, or a human-readable console format. Every message is kept (no
// sampling): election transitions are rare and each one matters.
func newLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", level)
	}
	var enc zapcore.Encoder
	switch format {
	case logFormatJSON:
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		cfg.EncodeDuration = zapcore.StringDurationEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	case logFormatConsole:
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("invalid --log-format %q: want %s or %s", format, logFormatJSON, logFormatConsole)
	}
	sink := zapcore.Lock(zapcore.AddSync(w))
	return zap.New(zapcore.NewCore(enc, sink, lvl), zap.AddCaller(), zap.ErrorOutput(sink)), nil
}

// bridgeKlog sends the logs of client-go (klog) to log. klog's verbosity
// levels map to zap levels below Debug, so only klog's V(0) messages pass an
// info-level logger, and V(1) a debug-level one.
func bridgeKlog(log *zap.Logger) {
	klog.SetLogger(zapr.NewLogger(log.Named("klog")))
}
