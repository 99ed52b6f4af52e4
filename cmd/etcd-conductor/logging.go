package main

import (
	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
)

// newLogger is the logger of every subcommand: JSON (or, with development, human-readable)
// lines with RFC 3339 timestamps to the nanosecond, at info level. A rollout step, a member's
// start and a handover take tens to hundreds of milliseconds; whole seconds, controller-runtime's
// default, hide the order of the lines that explain them.
func newLogger(development bool) logr.Logger {
	return newConfiguredLogger(development, nil)
}

// newConfiguredLogger is newLogger as the manager's configuration asks (etcd-druid's logging,
// validated on load): logLevel debug also shows the controllers' V(1) lines (each decision,
// each member query), error only errors; logFormat text is development's human-readable lines.
func newConfiguredLogger(development bool, cfg *configv1alpha1.LogConfiguration) logr.Logger {
	level := zapcore.InfoLevel
	if cfg != nil {
		switch cfg.LogLevel {
		case configv1alpha1.LogLevelDebug:
			level = zapcore.DebugLevel
		case configv1alpha1.LogLevelError:
			level = zapcore.ErrorLevel
		}
		development = development || cfg.LogFormat == configv1alpha1.LogFormatText
	}
	return zap.New(zap.UseDevMode(development), zap.Level(level), func(o *zap.Options) {
		o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder
	})
}
