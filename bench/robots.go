package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/polite-crawler/polite/internal/hostile"
	"github.com/polite-crawler/polite/robots"
)

// RobotsRow is the cost of Allowed against one hostile robots.txt.
type RobotsRow struct {
	Name     string // which file
	Lines    int    // its rules
	FileKiB  int
	PathKiB  int
	Checks   int           // Allowed calls timed
	PerCheck time.Duration // mean
}

// robotsCost times Allowed against the two hostile files on a path of pathKiB
// KiB of 'a's, and against the distinct file on a path of "aaaa<n>/" for
// n = 0, 1, … (a thousand pieces almost occur in it); and against files of
// 3-byte pieces, "/*xyz" on a path of letter pairs and "/*Zj*xyz" on a path
// where each xyz occurs only before "Zj". It times checks calls of each
// (after one untimed call).
func robotsCost(pathKiB, checks int) ([]RobotsRow, error) {
	as := "/" + strings.Repeat("a", pathKiB<<10)
	same, sameLines := hostile.WildcardFile(robots.MaxBytes, false)
	distinct, distinctLines := hostile.WildcardFile(robots.MaxBytes, true)
	short, shortLines := hostile.ShortPieceFile(robots.MaxBytes, "")
	marked, markedLines := hostile.ShortPieceFile(robots.MaxBytes, "Zj*")
	var rows []RobotsRow
	for _, c := range []struct {
		name, path string
		file       []byte
		lines      int
	}{
		{fmt.Sprintf("%d × `Disallow: /*a…ab`, path of 'a's", sameLines), as, same, sameLines},
		{fmt.Sprintf("%d distinct `Disallow: /*a…a<n>`, path of 'a's", distinctLines), as, distinct, distinctLines},
		{fmt.Sprintf("%d distinct `Disallow: /*a…a<n>`, path of `aaaa<n>/`", distinctLines), hostile.CraftedPath(pathKiB << 10), distinct, distinctLines},
		{fmt.Sprintf("%d distinct `Disallow: /*xyz`, path of `ab-ac-…`", shortLines), hostile.PairsPath(pathKiB << 10), short, shortLines},
		{fmt.Sprintf("%d distinct `Disallow: /*Zj*xyz`, path of xyz… then `Zj` then `ab-ac-…`", markedLines), hostile.MarkerPath(pathKiB << 10), marked, markedLines},
	} {
		p := robots.Parse(200, c.file, "politebot")
		if !p.Allowed(c.path) {
			return nil, fmt.Errorf("bench: robots: %s: disallowed", c.name)
		}
		start := time.Now()
		for range checks {
			p.Allowed(c.path)
		}
		rows = append(rows, RobotsRow{Name: c.name, Lines: c.lines, FileKiB: len(c.file) >> 10, PathKiB: len(c.path) >> 10,
			Checks: checks, PerCheck: time.Since(start) / time.Duration(checks)})
	}
	return rows, nil
}

func (r *Report) robotsVerdicts() []verdict {
	var v []verdict
	for _, x := range r.Robots {
		v = append(v, verdict{fmt.Sprintf("robots.txt check, %d KiB path, %s", x.PathKiB, x.Name), goals.robotsPerPath.String(),
			us(x.PerCheck), goals.robotsPerPath.met(float64(x.PerCheck))})
	}
	return v
}

func (r *Report) robotsSection(p func(string, ...any)) {
	if len(r.Robots) == 0 {
		return
	}
	p("## robots.txt: matching cost against a hostile file")
	p("")
	p("A site's robots.txt is read up to %d KiB and every URL of the site is checked against it (`robots.Policy.Allowed`). These files are built to make a wildcard matcher backtrack; no rule matches the paths, so every rule must be tried. The `aaaa<n>/` path holds every 4-byte window of about a thousand of the distinct rules' pieces without holding the pieces. The `xyz` files have pieces too short for a 4-byte window; before they were indexed by byte and pair, one check took 25–27 ms. Before commit 37e1fe5 compiled the rules, one check of an 8 KiB path of 'a's took 4.5–14 s on this machine.", robots.MaxBytes>>10)
	p("")
	p("| robots.txt and path | rules | size | path | checks | per check |")
	p("|---|---:|---:|---:|---:|---:|")
	for _, x := range r.Robots {
		p("| %s | %d | %d KiB | %d KiB | %d | **%s** |", x.Name, x.Lines, x.FileKiB, x.PathKiB, x.Checks, us(x.PerCheck))
	}
	p("")
	p("Goal: %s per check.", goals.robotsPerPath.short())
	p("")
}
