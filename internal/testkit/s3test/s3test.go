// Package s3test gives tests a real S3-compatible store: by default a
// versitygw server started once per test binary on loopback; another store
// of internal/s3server started the same way (S3LOCK_TEST_STORE=minio, ...);
// or any other endpoint (AWS S3, R2, ...) named by environment variables.
//
// Each test gets a Namespace: an *s3.Client, a bucket and a key prefix that
// no other test uses. With the default local server every namespace is a
// fresh bucket; with S3LOCK_TEST_STORE or an external endpoint it is a fresh
// prefix under TestPrefix in one shared bucket. Transports can be wrapped to
// count requests or inject faults.
//
// Packages that use it run their tests through Main, so the server stops when
// the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
)

// Environment variables that point the suite at another endpoint.
const (
	EnvEndpoint  = "S3LOCK_TEST_ENDPOINT"   // URL, or "aws" for the AWS default endpoints
	EnvRegion    = "S3LOCK_TEST_REGION"     // default us-east-1
	EnvBucket    = "S3LOCK_TEST_BUCKET"     // required with an external endpoint
	EnvAccessKey = "S3LOCK_TEST_ACCESS_KEY" // optional: else the standard AWS chain
	EnvSecretKey = "S3LOCK_TEST_SECRET_KEY" // optional: else the standard AWS chain
	EnvPathStyle = "S3LOCK_TEST_PATH_STYLE" // "true" for path-style addressing
)

// Environment variables that run the suite on another local store.
const (
	// EnvStore names a store of internal/s3server (versitygw, minio,
	// seaweedfs, s3rver) to start on loopback for this test binary, in
	// shared-bucket mode: one bucket, StoreBucket, and a fresh prefix per
	// test, as with an external endpoint.
	EnvStore = "S3LOCK_TEST_STORE"
	// EnvStoreDir, with EnvStore, is the store's data directory. It is
	// kept after the tests, so that a second run on the same directory
	// finds the first run's bucket and objects; without it the data goes
	// to a temporary directory that is removed.
	EnvStoreDir = "S3LOCK_TEST_STORE_DIR"
	// EnvDirectoryBuckets, set to 1, runs the suite "as on an S3 directory
	// bucket": each namespace is a bucket named as a directory bucket
	// (BASE--use1-az4--x-s3) on the local versitygw, reached through the
	// DirectoryBuckets emulation.
	EnvDirectoryBuckets = "S3LOCK_TEST_DIRECTORY_BUCKETS"
)

// DirectoryBucketSuffix ends the name of each namespace's bucket under
// EnvDirectoryBuckets: an S3 directory bucket's zone and "--x-s3".
const DirectoryBucketSuffix = "--use1-az4--x-s3"

// StoreBucket is the shared bucket of an EnvStore run.
const StoreBucket = "s3lock-shared"

// TestPrefix starts the prefix of every namespace in a shared bucket: a
// test run that leaves keys outside it has leaked them (see Outside).
const TestPrefix = "s3lock-test/"

// Target describes the store the tests talk to.
type Target struct {
	Endpoint  string // empty for AWS's own endpoints
	Region    string
	AccessKey string // empty: the standard AWS credential chain
	SecretKey string
	PathStyle bool
	// Bucket is the shared bucket of an external endpoint or of an
	// EnvStore run, in which every namespace is a prefix; empty for the
	// default local server, where every namespace gets its own bucket.
	Bucket string
	// Local is true for a store started by this package on loopback, whose
	// credentials and address the tests know (they may put a proxy of their
	// own in front of it).
	Local bool
	// Store is the kind of the local store; "" for an external endpoint.
	Store s3server.Kind
	// CAFile, when set, is a PEM bundle of the certificates clients trust
	// (a TLSStore's self-signed one) instead of the system's.
	CAFile string
	// Directory is set when Endpoint is the DirectoryBuckets emulation
	// (EnvDirectoryBuckets): buckets are named as directory buckets.
	Directory bool
}

var (
	serverOnce sync.Once
	server     s3server.Store
	serverTemp bool // server's data directory is temporary
	serverErr  error
	directory  *DirectoryBuckets // the emulation, under EnvDirectoryBuckets
)

// Main runs m and stops the local store, if one was started.
func Main(m *testing.M) int {
	code := m.Run()
	if directory != nil {
		directory.Close()
	}
	if server != nil {
		server.Stop()
		if serverTemp {
			_ = os.RemoveAll(server.DataDir())
		}
	}
	return code
}

// External reports whether the suite runs against an external endpoint.
func External() bool { return os.Getenv(EnvEndpoint) != "" }

// TargetFor returns the store for this test binary, starting the local
// server on first use.
func TargetFor(tb testing.TB) Target {
	tb.Helper()
	tg, err := LoadTarget()
	if err != nil {
		tb.Fatal(err)
	}
	return tg
}

// LoadTarget is TargetFor for code without a testing.TB (examples).
func LoadTarget() (Target, error) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		tg := Target{
			Region:    envOr(EnvRegion, "us-east-1"),
			AccessKey: os.Getenv(EnvAccessKey),
			SecretKey: os.Getenv(EnvSecretKey),
			PathStyle: os.Getenv(EnvPathStyle) == "true",
			Bucket:    os.Getenv(EnvBucket),
		}
		if ep != "aws" {
			tg.Endpoint = ep
		}
		if tg.Bucket == "" {
			return Target{}, fmt.Errorf("%s is set but %s is not: an external endpoint needs a bucket the tests may write to", EnvEndpoint, EnvBucket)
		}
		if os.Getenv(EnvStore) != "" {
			return Target{}, fmt.Errorf("%s and %s are both set: run the tests on a local store or on an external endpoint, not both", EnvStore, EnvEndpoint)
		}
		return tg, nil
	}
	serverOnce.Do(func() { serverErr = startServer() })
	if serverErr != nil {
		return Target{}, fmt.Errorf("starting the local S3 server: %w", serverErr)
	}
	creds := server.Credentials()
	tg := Target{
		Endpoint:  server.URL(),
		Region:    s3server.Region,
		AccessKey: creds.AccessKeyID,
		SecretKey: creds.SecretAccessKey,
		PathStyle: true,
		Local:     true,
		Store:     server.Kind(),
	}
	if os.Getenv(EnvStore) != "" {
		tg.Bucket = StoreBucket
	}
	if directory != nil {
		tg.Endpoint, tg.Directory = directory.URL, true
	}
	return tg, nil
}

// startLimit bounds building (the first time on a machine) and starting the
// local store.
const startLimit = 10 * time.Minute

// startServer starts the local store: EnvStore's kind in shared-bucket mode
// (creating StoreBucket unless it exists), else versitygw.
func startServer() error {
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	defer cancel()
	kind, shared := s3server.Versitygw, false
	if name := os.Getenv(EnvStore); name != "" {
		k, err := s3server.ParseKind(name)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvStore, err)
		}
		kind, shared = k, true
	}
	dir := os.Getenv(EnvStoreDir)
	if dir != "" && !shared {
		return fmt.Errorf("%s is set without %s", EnvStoreDir, EnvStore)
	}
	st, err := s3server.StartStore(ctx, kind, s3server.StoreOptions{Dir: dir})
	if err != nil {
		return err
	}
	server, serverTemp = st, dir == ""
	if os.Getenv(EnvDirectoryBuckets) == "1" {
		if shared {
			return fmt.Errorf("%s and %s are both set: the directory bucket emulation runs on the default versitygw", EnvDirectoryBuckets, EnvStore)
		}
		creds := st.Credentials()
		if directory, err = StartDirectoryBuckets(st.URL(), s3server.Region, creds.AccessKeyID, creds.SecretAccessKey); err != nil {
			return err
		}
	}
	if shared {
		return EnsureBucket(ctx, s3server.NewClient(st, nil), StoreBucket)
	}
	return nil
}

// Namespace is one test's private corner of the store.
type Namespace struct {
	Client *s3.Client
	Bucket string
	// Prefix starts every key the test writes ("" in a bucket of its own).
	Prefix string
	Target Target
}

// Name returns a lock name (or key) inside the namespace.
func (n *Namespace) Name(s string) string { return n.Prefix + s }

// Option changes how a client is built.
type Option func(*clientConfig)

type clientConfig struct {
	wrap       func(http.RoundTripper) http.RoundTripper
	noRetry    bool
	retryQuota uint
}

// WithTransport wraps the HTTP transport, e.g. with a Counter or Faults.
func WithTransport(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(c *clientConfig) { c.wrap = wrap }
}

// RoundTripFunc is an http.RoundTripper that is a function, for WithTransport.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// WithoutRetries makes the SDK give up after the first attempt, so a test
// sees every fault itself.
func WithoutRetries() Option { return func(c *clientConfig) { c.noRetry = true } }

// WithRetryQuota gives the SDK's retryer a token bucket of this size (the
// SDK's default is 500; a retry costs 5), so a test can run it dry and see
// its "retry quota exceeded" error.
func WithRetryQuota(tokens uint) Option { return func(c *clientConfig) { c.retryQuota = tokens } }

// New returns a fresh namespace with a client built from opts.
func New(tb testing.TB, opts ...Option) *Namespace {
	tb.Helper()
	ns, err := Open(tb.Context(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return ns
}

// Open is New for code without a testing.TB (examples).
func Open(ctx context.Context, opts ...Option) (*Namespace, error) {
	tg, err := LoadTarget()
	if err != nil {
		return nil, err
	}
	client, err := BuildClient(ctx, tg, opts...)
	if err != nil {
		return nil, err
	}
	ns := &Namespace{Client: client, Target: tg}
	if tg.Bucket == "" {
		ns.Bucket = "s3lock-" + RandomHex(6)
		create := func() error {
			_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(ns.Bucket)})
			return err
		}
		if tg.Directory {
			ns.Bucket += DirectoryBucketSuffix
			create = func() error { return directory.CreateBucket(ctx, ns.Bucket) }
		}
		if err := create(); err != nil {
			return nil, fmt.Errorf("creating bucket %s: %w", ns.Bucket, err)
		}
	} else {
		ns.Bucket = tg.Bucket
		ns.Prefix = TestPrefix + RandomHex(6) + "/"
	}
	return ns, nil
}

// NewClient returns another client for the same namespace, built from opts:
// e.g. a second contender with its own transport.
func (n *Namespace) NewClient(tb testing.TB, opts ...Option) *s3.Client {
	tb.Helper()
	return NewClient(tb, n.Target, opts...)
}

// NewClient builds an *s3.Client for tg.
func NewClient(tb testing.TB, tg Target, opts ...Option) *s3.Client {
	tb.Helper()
	c, err := BuildClient(tb.Context(), tg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// BuildClient builds an *s3.Client for tg.
func BuildClient(ctx context.Context, tg Target, opts ...Option) (*s3.Client, error) {
	var cc clientConfig
	for _, o := range opts {
		o(&cc)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	if tg.CAFile != "" {
		cfg, err := s3server.TrustingTLS(tg.CAFile)
		if err != nil {
			return nil, err
		}
		base.TLSClientConfig = cfg
	}
	var transport http.RoundTripper = base
	if cc.wrap != nil {
		transport = cc.wrap(transport)
	}
	o := s3.Options{
		Region:       tg.Region,
		UsePathStyle: tg.PathStyle,
		HTTPClient:   &http.Client{Transport: transport},
		Retryer: retry.NewStandard(func(so *retry.StandardOptions) {
			// Short backoffs keep fault tests fast; the retry count and the
			// retry quota stay at the SDK's defaults.
			so.MaxBackoff = 50 * time.Millisecond
			if cc.noRetry {
				so.MaxAttempts = 1
			}
			if cc.retryQuota > 0 {
				so.RateLimiter = ratelimit.NewTokenRateLimit(cc.retryQuota)
			}
		}),
	}
	if tg.Endpoint != "" {
		o.BaseEndpoint = aws.String(tg.Endpoint)
	}
	if tg.AccessKey != "" {
		o.Credentials = credentials.NewStaticCredentialsProvider(tg.AccessKey, tg.SecretKey, "")
	} else {
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(tg.Region))
		if err != nil {
			return nil, fmt.Errorf("loading AWS configuration: %w", err)
		}
		o.Credentials = cfg.Credentials
	}
	return s3.New(o), nil
}

// RandomHex returns n random bytes, hex encoded.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Keys lists every key under prefix in bucket.
func Keys(tb testing.TB, client *s3.Client, bucket, prefix string) []string {
	tb.Helper()
	var keys []string
	// The directory the prefix is in, as a directory bucket lists only
	// prefixes that end in "/"; keys outside the prefix are left out.
	dir := prefix[:strings.LastIndex(prefix, "/")+1]
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(dir)})
	for p.HasMorePages() {
		page, err := p.NextPage(tb.Context())
		if err != nil {
			tb.Fatalf("listing s3://%s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			if key := aws.ToString(o.Key); strings.HasPrefix(key, prefix) {
				keys = append(keys, key)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// String describes the target for logs.
func (tg Target) String() string {
	if tg.Local {
		store := string(tg.Store)
		if store == "" {
			store = "local store"
		}
		if tg.Bucket == "" {
			return fmt.Sprintf("%s at %s", store, tg.Endpoint)
		}
		return fmt.Sprintf("%s at %s (bucket %s)", store, tg.Endpoint, tg.Bucket)
	}
	return fmt.Sprintf("%s (bucket %s)", strings.TrimSpace(tg.Endpoint+" "+tg.Region), tg.Bucket)
}

// OffsetClock is the real clock shifted by a fixed offset: a host whose clock
// is wrong by Offset. Durations measured on it are exact. It satisfies
// s3lock.Clock.
type OffsetClock struct{ Offset time.Duration }

// Now returns time.Now() shifted by the offset; the monotonic reading is kept.
func (c OffsetClock) Now() time.Time { return time.Now().Add(c.Offset) }

// After returns time.After(d).
func (OffsetClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
