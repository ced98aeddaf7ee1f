package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/metrics"
)

// listenMetrics binds --metrics-addr and serves m there from now on, so
// that a port already taken stops the run before anything is seeded. nil
// (a Server whose methods do nothing) without --metrics-addr.
func listenMetrics(cfg *config.Config, m *metrics.Metrics) (*metrics.Server, error) {
	if cfg.MetricsAddr == "" {
		return nil, nil
	}
	srv, err := m.Listen(cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return srv, nil
}

// lingerMetrics keeps srv serving for --metrics-linger once the crawl is
// over, so that a last scrape reads its final figures, and says so; ctx's
// end (Ctrl-C) cuts it short, and a crawl stopped by ctx does not linger.
// The command is over meanwhile: a signal that ends the wait does not
// change its exit code (see finished).
func lingerMetrics(ctx context.Context, srv *metrics.Server, cfg *config.Config, log *slog.Logger) {
	if srv == nil || cfg.MetricsLinger <= 0 || ctx.Err() != nil {
		return
	}
	finished(ctx)
	log.Info("crawl over; still serving /metrics for a last scrape (Ctrl-C stops now)", "addr", srv.Addr(), "for", cfg.MetricsLinger.String())
	srv.Linger(ctx, cfg.MetricsLinger)
}
