package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Why Connect gave up, matched with errors.Is on its *ConnectError. Only
// ErrUnreachable may go away by itself; the others need a change of
// settings (or of server).
var (
	ErrUnreachable = errors.New("config: cannot reach Redis")
	ErrNotTLS      = errors.New("config: Redis does not speak TLS")
	ErrOnlyTLS     = errors.New("config: Redis speaks only TLS")
	ErrUntrusted   = errors.New("config: Redis's TLS certificate is not trusted")
	ErrCredentials = errors.New("config: Redis refused the credentials")
	ErrNoDatabase  = errors.New("config: Redis has no such database")
	ErrNotRedis    = errors.New("config: not a Redis server")
	ErrRefused     = errors.New("config: Redis refused the connection")
)

// ConnectError says which server Connect could not use, and why in words
// a user can act on. Kind is one of the Err* sentinels above; Err is what
// the client or the probe saw.
type ConnectError struct {
	Addr string // as RedisAddrs names it
	Kind error
	Why  string // completes "Redis at Addr ..." ("the server at Addr ..." for ErrNotRedis)
	Err  error
}

func (e *ConnectError) Error() string {
	switch e.Kind {
	case ErrUnreachable:
		return fmt.Sprintf("cannot reach Redis at %s: %v", e.Addr, e.Err)
	case ErrNotRedis:
		return fmt.Sprintf("the server at %s %s: %v", e.Addr, e.Why, e.Err)
	}
	return fmt.Sprintf("Redis at %s %s: %v", e.Addr, e.Why, e.Err)
}

func (e *ConnectError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Connect timing: each PING may take pingTimeout; what may go away
// (connection refused, a Redis still loading) is tried connectTries times
// with backoff doubling from firstBackoff, about 4 s in all.
const (
	pingTimeout  = 3 * time.Second
	connectTries = 5
	firstBackoff = 250 * time.Millisecond
)

// Connect builds the Redis client the settings describe (RedisOptions,
// with a pool for Workers) and waits until it answers PING. Failures that
// may go away (connection refused, a dial timeout, a Redis loading its
// data) are retried a few times with backoff, each logged at Warn; the
// others end it at once. On failure it returns a *ConnectError, whose Kind
// names the cause. It returns early with an error when ctx is done. A nil
// log logs nothing.
func (c *Config) Connect(ctx context.Context, log *slog.Logger) (redis.UniversalClient, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts, err := c.RedisOptions()
	if err != nil {
		return nil, err
	}
	// Tried on a client of its own that does not retry by itself, so
	// that each try is one dial and one PING, and the answer is first-hand;
	// a read waits half a try at most (a silent server is read from twice,
	// HELLO and its fallback).
	once := *opts
	once.MaxRetries, once.DialerRetries, once.PoolSize, once.DialTimeout, once.ReadTimeout = -1, 1, 1, pingTimeout, pingTimeout/2
	check := redis.NewUniversalClient(&once)
	defer check.Close()
	backoff := firstBackoff
	for try := 1; ; try++ {
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		err = check.Ping(pctx).Err()
		cancel()
		if err == nil {
			opts.PoolSize = c.Workers + 8
			return redis.NewUniversalClient(opts), nil
		}
		cerr := c.diagnose(ctx, opts, err)
		if cerr.Kind != ErrUnreachable || try == connectTries || ctx.Err() != nil {
			return nil, cerr
		}
		log.Warn("Redis not reachable yet; retrying", "addr", cerr.Addr, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// diagnose turns a failed PING into a ConnectError: from the error alone
// when it says enough, else (a timeout or garbage after connecting) from
// a probe of a single server.
func (c *Config) diagnose(ctx context.Context, opts *redis.UniversalOptions, err error) *ConnectError {
	e := &ConnectError{Addr: c.RedisAddrs(), Kind: ErrUnreachable, Err: err}
	var cert *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var header tls.RecordHeaderError
	var opErr *net.OpError
	var reply redis.Error
	switch {
	case errors.As(err, &cert), errors.As(err, &unknownCA):
		e.Kind, e.Why = ErrUntrusted, "has a TLS certificate this host does not trust (give its CA with --redis-ca FILE)"
	case errors.As(err, &header):
		e.Kind, e.Why = ErrNotTLS, "does not speak TLS (use redis:// rather than rediss://)"
	case redis.IsAuthError(err):
		e.Kind, e.Why = ErrCredentials, "refused the credentials (user and password in --redis)"
	case redis.HasErrorPrefix(err, "DB index is out of range"):
		e.Kind, e.Why = ErrNoDatabase, c.noDatabase(ctx, opts)
	case redis.IsLoadingError(err), redis.IsTryAgainError(err), redis.IsMasterDownError(err), redis.IsClusterDownError(err), redis.IsMaxClientsError(err):
		// still starting, failing over, or full: may go away
	case errors.As(err, &reply):
		e.Kind, e.Why = ErrRefused, "answered with an error"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		// refused, unroutable, or a dial timeout: may go away
	case !opts.IsClusterMode && opts.MasterName == "":
		kind, why := probe(ctx, opts.Addrs[0], opts.TLSConfig)
		e.Kind, e.Why = kind, why
	}
	return e
}

// noDatabase completes "Redis at ... " for a database index the server
// does not have, saying how many it has when CONFIG GET may be run.
func (c *Config) noDatabase(ctx context.Context, opts *redis.UniversalOptions) string {
	simple := opts.Simple()
	simple.DB = 0
	rdb := redis.NewClient(simple)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	why := fmt.Sprintf("has no database %d", opts.DB)
	got, err := rdb.ConfigGet(ctx, "databases").Result()
	if n := got["databases"]; err == nil && n != "" {
		return fmt.Sprintf("%s (it has %s, numbered from 0; give one of them after the port in --redis, as in redis://host:6379/0)", why, n)
	}
	return why + " (give a lower number after the port in --redis, as in redis://host:6379/0)"
}
