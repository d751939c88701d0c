package s3lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"sync"
)

// Client acquires and inspects locks in one bucket. It is safe for
// concurrent use; a Client holds no per-lock state, so any number of them,
// in any number of processes, may contend for the same locks.
type Client struct {
	api    S3API
	bucket string
	cfg    config
	// directory is set for an S3 directory bucket: its listings are read
	// whole, in no assumed order (listEpochs).
	directory bool

	cleanups sync.WaitGroup // background history cleanups in flight
}

// New returns a Client for the bucket. It checks the bucket name and the
// options, but makes no request: use storecheck.Verify to check that the store
// enforces conditional writes.
func New(api S3API, bucket string, opts ...Option) (*Client, error) {
	if api == nil {
		return nil, invalid("S3 client is nil")
	}
	cfg, err := newConfig(bucket, opts)
	if err != nil {
		return nil, err
	}
	if cfg.holder == "" {
		cfg.holder = defaultHolder()
	}
	return &Client{api: api, bucket: bucket, cfg: cfg, directory: isDirectoryBucket(bucket)}, nil
}

// ValidateConfig checks the bucket name and the options exactly as New
// does, for callers that must report bad settings before they build the S3
// client (whose configuration may read files or the network). The error
// matches ErrInvalidConfig (or ErrInvalidName).
func ValidateConfig(bucket string, opts ...Option) error {
	_, err := newConfig(bucket, opts)
	return err
}

func newConfig(bucket string, opts []Option) (config, error) {
	cfg := defaultConfig()
	if err := validateBucket(bucket); err != nil {
		return cfg, err
	}
	if err := apply(settings{client: &cfg, acquire: &cfg.acquire}, opts); err != nil {
		return cfg, err
	}
	if err := cfg.acquire.checkMaxHold(); err != nil {
		return cfg, err
	}
	if cfg.renewIntervalSet && cfg.renewInterval > cfg.acquire.leaseDuration/2 {
		return cfg, invalid("renew interval %s is more than half the lease duration %s: "+
			"a failed renewal would leave no time to retry", cfg.renewInterval, cfg.acquire.leaseDuration)
	}
	return cfg, nil
}

// Holder returns the identity the client writes into its leases
// (WithHolder; by default user@host:pid and a random suffix, one per
// process, so that every client of a process shares it and two processes
// never do).
func (c *Client) Holder() string { return c.cfg.holder }

// defaultHolder is the process's default holder: user@host:pid followed by a
// random suffix, drawn once.
var defaultHolder = sync.OnceValue(func() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	} else if v := os.Getenv("USER"); v != "" {
		name = v
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s@%s:%d-%s", name, host, os.Getpid(), randomHex(3))
})

// detached returns a context for work that must finish even if ctx has been
// cancelled (reading back a write whose outcome is unknown, abandoning an
// epoch): ctx's values, no cancellation, one request timeout.
func (c *Client) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.requestTimeout)
}

// randomHex returns n random bytes, hex encoded.
func randomHex(n int) string {
	b := make([]byte, n)
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// forEach calls fn(0) ... fn(n-1), at most limit at a time, and returns when
// all have returned.
func forEach(n, limit int, fn func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}
