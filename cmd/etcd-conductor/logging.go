package main

import (
	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger is the logger of every subcommand: JSON (or, with development, human-readable)
// lines with RFC 3339 timestamps to the nanosecond. A rollout step, a member's start and a
// handover take tens to hundreds of milliseconds; whole seconds, controller-runtime's default,
// hide the order of the lines that explain them.
func newLogger(development bool) logr.Logger {
	return zap.New(zap.UseDevMode(development), func(o *zap.Options) {
		o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder
	})
}
