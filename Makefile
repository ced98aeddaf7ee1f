# The README's commands. `make test` is what CI runs (via .ci/run).
GO ?= go

.PHONY: test check vet race bench redis-server

test: redis-server check vet race

# Tests start their own redis-server; install it when missing (Debian/Ubuntu).
redis-server:
	@command -v redis-server >/dev/null || { \
	  echo "installing redis-server (apt-get)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq redis-server >/dev/null; }
	@redis-server --version

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

race:
	$(GO) test -race -count=1 ./...

# Benchmarks: figures, never pass/fail.
bench: redis-server
	$(GO) test -run '^$$' -bench . -benchtime 3000x ./limiter/
