package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/polite-crawler/polite/robots"
)

// RobotsGoal is the most one robots.Policy.Allowed check may cost on an
// 8 KiB path, whatever the site's robots.txt says (issue 12).
const RobotsGoal = 5 * time.Millisecond

// RobotsRow is the cost of Allowed against one hostile robots.txt.
type RobotsRow struct {
	Name     string // which file
	Lines    int    // its rules
	FileKiB  int
	PathKiB  int
	Checks   int           // Allowed calls timed
	PerCheck time.Duration // mean
}

// hostileRobots is a robots.txt of about robots.MaxBytes made to slow a
// wildcard matcher down: lines "Disallow: /*" + 100 'a' + a tail, never
// matched by a path of 'a's. With distinct, each tail is the line's number,
// so no two rules are the same.
func hostileRobots(distinct bool) (file []byte, lines int) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	a := strings.Repeat("a", 100)
	for ; b.Len() < robots.MaxBytes-200; lines++ {
		tail := "b"
		if distinct {
			tail = strconv.Itoa(lines)
		}
		b.WriteString("Disallow: /*" + a + tail + "\n")
	}
	return []byte(b.String()), lines
}

// Robots times Allowed on a path of pathKiB KiB of 'a's against the two
// hostile files, checks times each (after one untimed call).
func Robots(pathKiB, checks int) ([]RobotsRow, error) {
	path := "/" + strings.Repeat("a", pathKiB<<10)
	var rows []RobotsRow
	for _, distinct := range []bool{false, true} {
		file, lines := hostileRobots(distinct)
		name := fmt.Sprintf("%d × `Disallow: /*a…ab`", lines)
		if distinct {
			name = fmt.Sprintf("%d distinct `Disallow: /*a…a<n>`", lines)
		}
		p := robots.Parse(200, file, "politebot")
		if !p.Allowed(path) {
			return nil, fmt.Errorf("bench: robots: %s disallows a path of 'a's", name)
		}
		start := time.Now()
		for range checks {
			p.Allowed(path)
		}
		rows = append(rows, RobotsRow{Name: name, Lines: lines, FileKiB: len(file) >> 10, PathKiB: pathKiB,
			Checks: checks, PerCheck: time.Since(start) / time.Duration(checks)})
	}
	return rows, nil
}

func (r *Report) robotsVerdicts() []verdict {
	var v []verdict
	for _, x := range r.Robots {
		v = append(v, verdict{fmt.Sprintf("robots.txt check, %d KiB path, %s", x.PathKiB, x.Name), "≤ " + us(RobotsGoal) + " per Allowed",
			us(x.PerCheck), x.PerCheck <= RobotsGoal})
	}
	return v
}

func (r *Report) robotsSection(p func(string, ...any)) {
	if len(r.Robots) == 0 {
		return
	}
	p("## robots.txt: matching cost against a hostile file")
	p("")
	p("A site's robots.txt is read up to %d KiB and every URL of the site is checked against it (`robots.Policy.Allowed`). These files are built to make a wildcard matcher backtrack; the path is all 'a's, so no rule matches and every rule must be tried. Before rules were compiled (commit 37e1fe5), one check of an 8 KiB path took 4.5–14 s on this machine.", robots.MaxBytes>>10)
	p("")
	p("| robots.txt | rules | size | path | checks | per check |")
	p("|---|---:|---:|---:|---:|---:|")
	for _, x := range r.Robots {
		p("| %s | %d | %d KiB | %d KiB | %d | **%s** |", x.Name, x.Lines, x.FileKiB, x.PathKiB, x.Checks, us(x.PerCheck))
	}
	p("")
	p("Goal: ≤ %s per check.", us(RobotsGoal))
	p("")
}
