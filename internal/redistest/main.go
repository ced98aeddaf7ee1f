package redistest

import (
	"fmt"
	"os"
)

// M is what Main needs of a *testing.M. It is an interface so that the
// binaries that link this package (the crawler's bench) do not link testing.
type M interface {
	Run() (code int)
}

// Main is a package's TestMain for tests that share one server: it starts a
// server, stores it in *srv, calls each of before with it in order, runs the
// tests, closes the server and exits with the tests' code. If the server
// does not start or a before function fails, it prints the error and exits
// with status 1 without running any test. It never returns.
//
//	func TestMain(m *testing.M) { redistest.Main(m, &srv) }
func Main(m M, srv **Server, before ...func(*Server) error) {
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*srv = s
	for _, f := range before {
		if err := f(s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			s.Close()
			os.Exit(1)
		}
	}
	code := m.Run()
	s.Close()
	os.Exit(code)
}
