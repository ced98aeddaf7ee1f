package warc

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/nlnwa/gowarc"
)

// rec is one record read back from a file with gowarc.
type rec struct {
	file      string
	typ       string
	id        string
	uri       string
	ip        string
	concTo    string
	truncated string
	warcinfo  string // WARC-Warcinfo-ID
	status    int    // response records
	head      string // request records: the HTTP request head
	payload   []byte // request and response records
	fields    string // warcinfo records: the block
}

// readDir reads every finished WARC file of dir with gowarc, in name
// order, and checks each against what the Writer promises: no file left
// .open, one gzip member per record, block and payload digests (sha1,
// base32) that match the bytes, and a warcinfo record first.
func readDir(t *testing.T, dir string) []rec {
	t.Helper()
	if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) > 0 {
		t.Fatalf("files still open after Close: %v", open)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no WARC files in %s (%v)", dir, err)
	}
	sort.Strings(names)
	var all []rec
	for _, name := range names {
		recs := readFile(t, name)
		if members := gzipMembers(t, name); members != len(recs) {
			t.Errorf("%s: %d gzip members for %d records: want one per record", name, members, len(recs))
		}
		if recs[0].typ != "warcinfo" {
			t.Errorf("%s: first record is %s, want warcinfo", name, recs[0].typ)
		}
		for _, r := range recs[1:] {
			if r.warcinfo != recs[0].id {
				t.Errorf("%s: record %s names warcinfo %q, want %q", name, r.id, r.warcinfo, recs[0].id)
			}
		}
		all = append(all, recs...)
	}
	return all
}

func readFile(t *testing.T, name string) []rec {
	t.Helper()
	f, err := gowarc.NewWarcFileReader(name, 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []rec
	for {
		wr, _, v, err := f.Next()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatalf("%s: record %d: %v", name, len(recs), err)
		}
		if v != nil && !v.Valid() {
			t.Errorf("%s: record %d: %v", name, len(recs), v)
		}
		h := wr.WarcHeader()
		r := rec{
			file: name, typ: wr.Type().String(), id: h.GetId(gowarc.WarcRecordID),
			uri: h.Get(gowarc.WarcTargetURI), ip: h.Get(gowarc.WarcIPAddress),
			concTo: h.GetId(gowarc.WarcConcurrentTo), truncated: h.Get(gowarc.WarcTruncated),
			warcinfo: h.GetId(gowarc.WarcWarcinfoID),
		}
		if err := wr.Block().Cache(); err != nil {
			t.Fatal(err)
		}
		raw := readAll(t, wr.Block().RawBytes)
		checkDigest(t, r.id, "block", h.Get(gowarc.WarcBlockDigest), raw)
		switch b := wr.Block().(type) {
		case gowarc.HttpResponseBlock:
			r.status = b.HttpStatusCode()
			r.payload = readAll(t, b.PayloadBytes)
			checkDigest(t, r.id, "payload", h.Get(gowarc.WarcPayloadDigest), r.payload)
		case gowarc.HttpRequestBlock:
			r.payload = readAll(t, b.PayloadBytes)
			r.head = string(raw[:len(raw)-len(r.payload)])
		default:
			r.fields = string(raw)
		}
		recs = append(recs, r)
	}
}

func readAll(t *testing.T, f func() (io.Reader, error)) []byte {
	t.Helper()
	r, err := f()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkDigest checks a WARC digest field against sha1 of b, base32 as the
// convention has it.
func checkDigest(t *testing.T, id, what, field string, b []byte) {
	t.Helper()
	sum := sha1.Sum(b)
	if want := "sha1:" + base32.StdEncoding.EncodeToString(sum[:]); field != want {
		t.Errorf("record %s: %s digest %q, want %q", id, what, field, want)
	}
}

// gzipMembers counts the gzip members of a file.
func gzipMembers(t *testing.T, name string) int {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	br := bytes.NewReader(data)
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	n := 0
	for {
		zr.Multistream(false)
		if _, err := io.Copy(io.Discard, zr); err != nil {
			t.Fatalf("%s: member %d: %v", name, n, err)
		}
		n++
		if err := zr.Reset(br); err == io.EOF {
			return n
		} else if err != nil {
			t.Fatalf("%s: member %d: %v", name, n, err)
		}
	}
}

// exchanges pairs each response record with the request naming it, and
// fails on a response without exactly one request or a request without
// its response.
func exchanges(t *testing.T, recs []rec) map[string][]pair {
	t.Helper()
	resp := map[string]rec{}
	for _, r := range recs {
		if r.typ == "response" {
			resp[r.id] = r
		}
	}
	byURI := map[string][]pair{}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.typ != "request" {
			continue
		}
		p, ok := resp[r.concTo]
		if !ok {
			t.Errorf("request %s: WARC-Concurrent-To %q names no response record", r.id, r.concTo)
			continue
		}
		if seen[p.id] {
			t.Errorf("response %s named by two requests", p.id)
		}
		seen[p.id] = true
		if p.uri != r.uri || p.file != r.file {
			t.Errorf("request %s (%s in %s) and response (%s in %s) differ", r.id, r.uri, r.file, p.uri, p.file)
		}
		byURI[p.uri] = append(byURI[p.uri], pair{req: r, resp: p})
	}
	if len(seen) != len(resp) {
		t.Errorf("%d response records, %d named by a request", len(resp), len(seen))
	}
	return byURI
}

type pair struct{ req, resp rec }
