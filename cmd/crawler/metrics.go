package main

import (
	"context"
	"log/slog"

	"github.com/polite-crawler/polite/config"
	"github.com/polite-crawler/polite/metrics"
)

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
