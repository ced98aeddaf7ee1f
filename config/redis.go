package config

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/polite-crawler/polite/internal/redisacl"
	"github.com/redis/go-redis/v9"
)

// RedisOptions turns the Redis settings into go-redis options: a single
// node from --redis, or a cluster or sentinel set with --redis's user,
// password, database and TLS. Connect builds the client from them.
func (c *Config) RedisOptions() (*redis.UniversalOptions, error) {
	single, err := redis.ParseURL(c.Redis)
	if err != nil {
		return nil, fmt.Errorf("config: --redis: %w", err)
	}
	o := &redis.UniversalOptions{
		Addrs:     []string{single.Addr},
		Username:  single.Username,
		Password:  single.Password,
		DB:        single.DB,
		TLSConfig: single.TLSConfig,
		// No CLIENT SETINFO on each new connection: a round trip each (an
		// error before Redis 7.2, or for a user who may not run it) for a
		// library label in CLIENT LIST.
		DisableIdentity: true,
	}
	if c.RedisCA != "" && o.TLSConfig != nil {
		pool, err := c.caPool()
		if err != nil {
			return nil, fmt.Errorf("config: --redis-ca: %w", err)
		}
		o.TLSConfig.RootCAs = pool
	}
	switch {
	case len(c.RedisCluster) > 0:
		o.Addrs, o.IsClusterMode = c.RedisCluster, true
	case c.RedisSentinel != "":
		master, addrs, _ := strings.Cut(c.RedisSentinel, "@")
		o.MasterName, o.Addrs = master, strings.Split(addrs, ",")
	}
	return o, nil
}

// RedisAddrs names the addresses tried, for error messages.
func (c *Config) RedisAddrs() string {
	switch {
	case len(c.RedisCluster) > 0:
		return "cluster " + strings.Join(c.RedisCluster, ",")
	case c.RedisSentinel != "":
		return "sentinel " + c.RedisSentinel
	}
	if o, err := redis.ParseURL(c.Redis); err == nil {
		return o.Addr
	}
	return c.Redis
}

// caPool is the system's certificate pool with --redis-ca's added.
func (c *Config) caPool() (*x509.CertPool, error) {
	pem, err := os.ReadFile(c.RedisCA)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", c.RedisCA)
	}
	return pool, nil
}

// PermHint names what the Redis user lacks when err is its ACL refusing a
// key or channel under --prefix or a command (redisacl.Hint), also when
// wrapped; for every other error, and nil, it returns "".
func (c *Config) PermHint(err error) string {
	return redisacl.Hint(err, c.Prefix)
}

// WithPermHint is err with PermHint's words appended in parentheses when it
// has any, else err as it is (nil stays nil).
func (c *Config) WithPermHint(err error) error {
	if hint := c.PermHint(err); hint != "" {
		return fmt.Errorf("%w (%s)", err, hint)
	}
	return err
}
