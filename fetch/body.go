package fetch

import (
	"io"
	"sync"
	"sync/atomic"
)

// permitBody releases the permit when the body is closed (not at EOF: a
// reader may stop early), once, saying whether it was closed before its end.
type permitBody struct {
	io.ReadCloser
	once sync.Once
	eof  atomic.Bool
	err  atomic.Pointer[error] // the first read error other than EOF
	n    atomic.Int64          // bytes read
	done func(early bool)
}

func (b *permitBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if err == io.EOF {
		b.eof.Store(true)
	} else if err != nil {
		b.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// failed is the first read error other than EOF, or nil.
func (b *permitBody) failed() error {
	if e := b.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (b *permitBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.done(!b.eof.Load()) })
	return err
}
