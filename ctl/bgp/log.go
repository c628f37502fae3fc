package bgp

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// zapLogger hands GoBGP's log lines to lbd's logger. GoBGP's info lines
// (every FSM transition, every path) are logged at debug: lbd logs the
// session changes and announcements that matter itself.
type zapLogger struct{ l *zap.Logger }

func fields(f gobgplog.Fields) []zap.Field {
	out := make([]zap.Field, 0, len(f))
	for k, v := range f {
		out = append(out, zap.Any(k, v))
	}
	return out
}

func (z zapLogger) Panic(msg string, f gobgplog.Fields) { z.l.Panic(msg, fields(f)...) }
func (z zapLogger) Fatal(msg string, f gobgplog.Fields) { z.l.Error(msg, fields(f)...) }
func (z zapLogger) Error(msg string, f gobgplog.Fields) { z.l.Error(msg, fields(f)...) }
func (z zapLogger) Warn(msg string, f gobgplog.Fields)  { z.l.Warn(msg, fields(f)...) }
func (z zapLogger) Info(msg string, f gobgplog.Fields)  { z.l.Debug(msg, fields(f)...) }
func (z zapLogger) Debug(msg string, f gobgplog.Fields) {
	if z.l.Core().Enabled(zapcore.DebugLevel) {
		z.l.Debug(msg, fields(f)...)
	}
}
func (z zapLogger) SetLevel(gobgplog.LogLevel) {}
func (z zapLogger) GetLevel() gobgplog.LogLevel {
	if z.l.Core().Enabled(zapcore.DebugLevel) {
		return gobgplog.DebugLevel
	}
	return gobgplog.InfoLevel
}
