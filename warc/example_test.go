package warc_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/nlnwa/gowarc"
	"github.com/polite-crawler/polite/warc"
)

// A crawl opens one Writer, sends its requests through a Transport, and
// closes the Writer when its requests are done.
func ExampleTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "warc-example-")
	defer os.RemoveAll(dir)

	w, err := warc.Open(dir, &warc.Options{Prefix: "example", IsPartOf: "example-crawl"})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: &warc.Transport{Base: http.DefaultTransport, W: w}}
	resp, err := client.Get(srv.URL + "/page")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close() // the exchange is recorded once its body is read or closed
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	s := w.Stats()
	fmt.Printf("fetched %q; %d exchange in %d file, %d errors\n", body, s.Exchanges, s.Files, s.Errors)

	names, _ := filepath.Glob(filepath.Join(dir, "example-*.warc.gz"))
	f, err := gowarc.NewWarcFileReader(names[0], 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	for {
		r, _, _, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Type())
	}
	// Output:
	// fetched "hello"; 1 exchange in 1 file, 0 errors
	// warcinfo
	// response
	// request
}
