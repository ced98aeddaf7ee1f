// Package sitetest starts the multi-site test server (package testserver)
// for a test: its sites answer on loopback until the test ends.
package sitetest

import (
	"testing"

	"github.com/polite-crawler/polite/testserver"
)

// Start serves profile p for t, with no control listener (no dashboard),
// and closes it when t and its subtests end. It fails t at once if the
// server cannot start.
func Start(t testing.TB, p testserver.Profile) *testserver.Server {
	t.Helper()
	ts, err := testserver.New(p, testserver.WithControl(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	return ts
}
