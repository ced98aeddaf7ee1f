package warc

import "os"

// Defaults of Options.
const (
	DefaultPrefix      = "crawl"
	DefaultMaxFileSize = 1 << 30 // 1 GiB
	DefaultSoftware    = "polite-crawler"
	DefaultMaxMemBytes = 256 << 10 // 256 KiB
	DefaultQueue       = 16
)

// Options configure a Writer. A nil *Options, and every zero field, means
// the default named on the field.
type Options struct {
	// Prefix starts every file name (default DefaultPrefix). Characters
	// other than letters, digits, '.', '_' and '-' become '_'.
	Prefix string
	// MaxFileSize is the size, in bytes on disk, past which a file is
	// closed and the next record starts a new one (default 1 GiB). A file
	// passes it by at most one exchange: a record is never split.
	MaxFileSize int64
	// Software, Operator, IsPartOf and Description fill the warcinfo record
	// at the start of each file (Software default DefaultSoftware; the
	// others are left out when empty).
	Software, Operator, IsPartOf, Description string
	// MaxMemBytes is how much of one exchange is held in memory before the
	// rest is spooled to a temporary file (default 256 KiB).
	MaxMemBytes int64
	// TempDir is where large exchanges are spooled until written (default
	// os.TempDir()). Spool files are removed once their record is written.
	TempDir string
	// Queue is how many finished exchanges may wait for the file writer
	// (default 16). When it is full, the caller closing a response body
	// waits: records are never dropped to keep up.
	Queue int
}

func (o *Options) prefix() string {
	if o == nil || o.Prefix == "" {
		return DefaultPrefix
	}
	return sanitize(o.Prefix)
}

func (o *Options) maxFileSize() int64 {
	if o == nil || o.MaxFileSize <= 0 {
		return DefaultMaxFileSize
	}
	return o.MaxFileSize
}

func (o *Options) software() string {
	if o == nil || o.Software == "" {
		return DefaultSoftware
	}
	return o.Software
}

func (o *Options) maxMemBytes() int64 {
	if o == nil || o.MaxMemBytes <= 0 {
		return DefaultMaxMemBytes
	}
	return o.MaxMemBytes
}

func (o *Options) tempDir() string {
	if o == nil || o.TempDir == "" {
		return os.TempDir()
	}
	return o.TempDir
}

func (o *Options) queue() int {
	if o == nil || o.Queue <= 0 {
		return DefaultQueue
	}
	return o.Queue
}

func (o *Options) get(f func(*Options) string) string {
	if o == nil {
		return ""
	}
	return f(o)
}

// sanitize keeps a file name part to letters, digits, '.', '_' and '-'.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}
