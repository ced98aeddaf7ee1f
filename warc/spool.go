package warc

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"hash"
	"io"
	"os"
)

// spool holds one record block on its way to a file: the first max bytes
// in memory, the rest in a temporary file in dir. It computes the block's
// digest, and the payload's (the bytes written with payload set), as they
// are written.
type spool struct {
	max     int64
	dir     string
	mem     bytes.Buffer
	f       *os.File
	n       int64
	block   hash.Hash
	payload hash.Hash
}

func newSpool(max int64, dir string) *spool {
	return &spool{max: max, dir: dir, block: sha1.New(), payload: sha1.New()}
}

// write appends p to the block (and to the payload if payload is set).
func (s *spool) write(p []byte, payload bool) error {
	if s.f == nil && int64(s.mem.Len()+len(p)) > s.max {
		f, err := os.CreateTemp(s.dir, "warc-spool-*")
		if err != nil {
			return err
		}
		s.f = f
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			return err
		}
		s.mem = bytes.Buffer{}
	}
	if s.f != nil {
		if _, err := s.f.Write(p); err != nil {
			return err
		}
	} else {
		s.mem.Write(p)
	}
	s.n += int64(len(p))
	s.block.Write(p)
	if payload {
		s.payload.Write(p)
	}
	return nil
}

// reader returns the whole block from its start.
func (s *spool) reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.LimitReader(s.f, s.n), nil
}

// close removes the temporary file, if any.
func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
		s.f = nil
	}
	s.mem = bytes.Buffer{}
}

// digest formats a sha1 as WARC digest fields have it: "sha1:" and base32.
func digest(h hash.Hash) string {
	return fmt.Sprintf("sha1:%s", base32.StdEncoding.EncodeToString(h.Sum(nil)))
}
