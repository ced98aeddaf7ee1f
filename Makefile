# The README's commands. `make test` is what CI runs (via .ci/run).
GO ?= go

.PHONY: test check vet race fuzz bench redis-server dashboard-screenshot

test: redis-server check vet fuzz race

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
	$(GO) test -race -count=1 -timeout 20m ./...

# Short fuzz runs of the robots.txt parser and matcher and of URL
# normalisation on every test run (CI included). Budgets are counts, not
# durations: a duration budget trips a race in Go 1.26's fuzz coordinator
# (golang/go#75804, fixed in 1.27) that fails with "context deadline
# exceeded" and no input.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 100000x ./robots/
	$(GO) test -run '^$$' -fuzz FuzzAllowed -fuzztime 50000x ./robots/
	$(GO) test -run '^$$' -fuzz FuzzNormalize -fuzztime 100000x ./frontier/

# Benchmarks: figures, never pass/fail.
bench: redis-server
	$(GO) test -run '^$$' -bench . -benchtime 3000x ./limiter/ ./frontier/

# Renders the testserver dashboard with some traffic and screenshots it with
# headless Chromium (installed if missing) into dashboard.png.
dashboard-screenshot:
	@command -v chromium >/dev/null || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO apt-get install -y -qq chromium >/dev/null; }
	DASHBOARD_OUT=$(CURDIR)/dashboard.html $(GO) test -count=1 -run TestDashboardRenders ./testserver/
	chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
	  --disable-component-update --disable-sync --user-data-dir=$$(mktemp -d) --window-size=1400,500 \
	  --screenshot=$(CURDIR)/dashboard.png file://$(CURDIR)/dashboard.html
