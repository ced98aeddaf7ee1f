module github.com/polite-crawler/polite

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/temoto/robotstxt v1.1.2
	golang.org/x/sync v0.24.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
