package bench

import (
	"context"
	"fmt"
)

// scaleCrawls shows how the crawl's cost grows: with the number of sites (one
// process of 32 workers) and with the workers in a process (20 sites). Each
// crawl is sized to last about secs at the ideal rate, so the figures
// compare like with like.
func scaleCrawls(ctx context.Context, base CrawlSpec, sites, workers []int, secs float64) ([]CrawlRow, error) {
	var rows []CrawlRow
	pagesFor := func(nSites, slots int) int {
		ideal := float64(slots) / base.Latency.Seconds()
		return max(4, int(secs*ideal)/nSites)
	}
	for _, n := range sites {
		const w = 32
		s := base
		s.Sites, s.Pages = n, pagesFor(n, min(w, n*siteCap))
		row, err := s.polite(ctx, fmt.Sprintf("%d sites, 1 × %d workers", n, w), "locked", 1, w)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	for _, w := range workers {
		s := base
		s.Sites = 20
		s.Pages = pagesFor(s.Sites, min(w, s.Sites*siteCap))
		row, err := s.polite(ctx, fmt.Sprintf("20 sites, 1 × %d workers", w), "locked", 1, w)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}
