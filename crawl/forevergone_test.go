package crawl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/polite-crawler/polite/frontier"
	"github.com/polite-crawler/polite/internal/redistest"
	"github.com/polite-crawler/polite/testserver"
)

// A process crawling with Forever on waits for more URLs once the crawl is
// done, sending nothing that would tell it the crawl was deleted: it asks
// (deletedWhileIdle), and crawler delete of the done crawl ends its Run
// with frontier.ErrCrawlGone instead of leaving it idle for good. Before
// the delete, it waits: Run does not return.
func TestForeverProcessStopsWhenItsDoneCrawlIsDeleted(t *testing.T) {
	was := goneLook
	goneLook = 200 * time.Millisecond
	t.Cleanup(func() { goneLook = was })
	ts := serve(t, testserver.Profile{Name: "forever", Seed: 1, Sites: []testserver.SiteSpec{{Pages: 5, Links: 2}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := redistest.Prefix(t)
	c := crawlerOn(t, prefix, "forever", nil, Options{Workers: 2, Forever: true})
	if n, err := c.Seed(ctx, []string{ts.Sites()[0].URL + "/"}); err != nil || n != 1 {
		t.Fatalf("Seed: %d, %v", n, err)
	}
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	drained := func() bool {
		st, err := c.fr.Stats(ctx)
		return err == nil && st.Done > 0 && st.Queued == 0 && st.InFlight == 0
	}
	if !waitFor(30*time.Second, drained) {
		t.Fatal("the crawl did not finish")
	}
	select {
	case err := <-ran:
		t.Fatalf("Run returned %v with Forever on, before any delete", err)
	case <-time.After(5 * goneLook):
	}
	if _, err := frontier.Delete(ctx, srv.Client(), prefix, "forever", frontier.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	select {
	case err := <-ran:
		if !errors.Is(err, frontier.ErrCrawlGone) || !strings.Contains(err.Error(), "waited for more URLs (--forever)") {
			t.Fatalf("Run after the delete: %v, want frontier.ErrCrawlGone", err)
		}
		t.Logf("stopped %s after the delete", time.Since(deleted).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the --forever process still waits 20 s after its crawl was deleted")
	}
	checkPoliteSites(t, ts)
}
