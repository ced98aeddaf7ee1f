//go:build unix

package console

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// columns is the width of the terminal w is, or 0 when unknown.
func columns(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
