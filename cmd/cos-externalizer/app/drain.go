package app

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/cos-externalizer/cos-externalizer/webhook/server"
)

// drainFirst returns the manager's context. When ctx ends (SIGTERM), d starts draining, and the
// manager's context ends period later: the webhooks keep serving, each response closing its
// connection, so the API server has moved its connections to the other replicas before this one
// closes them. period 0 stops at once.
func drainFirst(ctx context.Context, log logr.Logger, clk clock.Clock, d *server.Drain, period time.Duration) context.Context {
	if period <= 0 {
		return ctx
	}
	mgrCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-ctx.Done()
		d.Start()
		log.Info("stopping: the webhooks drain their connections first", "period", period)
		<-clk.After(period)
		cancel()
	}()
	return mgrCtx
}
