// Package bridge is how the sub-packages of s3lock (fence, storecheck)
// reach a client's request layer without it becoming public API. Package
// s3lock registers its side in an init function (it imports this package;
// the sub-packages import both, so there is no cycle), and a sub-package
// asks Of for the client it was given.
//
// Every request made through Client goes through s3lock's one request
// function: the client's per-request timeout, the observer's observe.Request,
// and an error that names the operation, bucket and key and matches
// s3lock's sentinels (ErrUnavailable, ErrAccessDenied, ...).
package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Client is an s3lock.Client as its sub-packages use it.
type Client interface {
	// Bucket is the client's bucket, Owner its expected bucket owner (nil:
	// none), and Directory whether the bucket is an S3 directory bucket.
	Bucket() string
	Owner() *string
	Directory() bool
	// API is the client's S3 API.
	API() API
	// Request makes one S3 call through the client's request layer.
	Request(ctx context.Context, r Request, call func(context.Context) error) error
	// Detached returns a context for clean-up that must run even if ctx
	// has ended, bounded by the client's request timeout.
	Detached(ctx context.Context) (context.Context, context.CancelFunc)
	// PutDefaults gives in (a copy the caller may change) the client's
	// expected bucket owner when in writes to the client's bucket, and the
	// client's encryption and ACL unless in sets its own.
	PutDefaults(in *s3.PutObjectInput)
	// PutEpoch writes an object of the client's as the protocol writes an
	// epoch: create-only when etag is "" (If-None-Match: *), otherwise
	// compare-and-swap on etag (If-Match). It returns the new ETag.
	PutEpoch(ctx context.Context, key, etag string, body []byte) (string, error)
	// DeleteKey deletes one object (DeleteObject), DeleteKeys several
	// (DeleteObjects).
	DeleteKey(ctx context.Context, key string) error
	DeleteKeys(ctx context.Context, keys []string) error
	// ProbeCycle lists prefix and makes one acquire-read-release cycle of
	// the lock prefix + "permissions", as the protocol makes them, and
	// ignores their errors: a caller learns what happened from the
	// requests' log (WithRequestLog).
	ProbeCycle(ctx context.Context, prefix string)
}

// API is the part of s3lock.S3API the sub-packages call directly.
type API interface {
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// Request names one S3 call for Client.Request.
type Request struct {
	Op  string // the S3 operation, "PutObject"
	Key string // the key (or prefix) the call concerns
	// Bucket is the bucket the call goes to; "" for the client's.
	Bucket string
	// Extra is added to the client's per-request timeout (the time a
	// large body takes to travel).
	Extra time.Duration
}

// Do is Client.Request for a call with a result.
func Do[T any](ctx context.Context, c Client, r Request, call func(context.Context) (T, error)) (T, error) {
	var out T
	err := c.Request(ctx, r, func(ctx context.Context) error {
		var err error
		out, err = call(ctx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// ProbeSegment is the path segment under which package storecheck writes
// its probes, and which package s3lock reserves: no lock name contains it.
const ProbeSegment = "s3lock-probe"

// Class is what a failed request means, as the sub-packages tell it apart
// (package s3lock's classification, in fewer classes).
type Class int

// The classes of a failed request.
const (
	Other        Class = iota // none of the below, or no error
	Precondition              // 412: a conditional header did not hold
	Conflict                  // 409: a conflicting conditional request is in progress
	NotFound                  // 404: no such key
	NotModified               // 304
	Transient                 // 5xx, throttling, timeouts, no answer: it may pass
	Denied                    // 403, or no usable credentials
	Unsupported               // 501: the store does not implement the request
)

// Impl is package s3lock's side of the bridge.
type Impl struct {
	// Of returns the Client of an *s3lock.Client.
	Of func(client any) Client
	// ClassOf classifies a request's error.
	ClassOf func(err error) Class
	// Describe says in a short sentence what the store answered (or why
	// it did not), as s3lock's own errors do.
	Describe func(err error) string
}

var impl Impl

// Register installs package s3lock's side; it calls it from an init
// function, once.
func Register(i Impl) { impl = i }

// Of returns the Client of client, an *s3lock.Client.
func Of(client any) Client { return impl.Of(client) }

// ClassOf classifies err, the error of a request made through a Client.
func ClassOf(err error) Class { return impl.ClassOf(err) }

// Describe says in a short sentence what the store answered to err's
// request, or why it did not answer.
func Describe(err error) string { return impl.Describe(err) }

// RandomHex returns n random bytes, hex encoded: the ids the sub-packages
// write (a fenced write's, a probe's).
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// requestLogKey is the context key of WithRequestLog's function.
type requestLogKey struct{}

// WithRequestLog returns a context under which every request made through
// package s3lock's request layer is reported to note, with its operation
// and error (nil: it succeeded).
func WithRequestLog(ctx context.Context, note func(op string, err error)) context.Context {
	return context.WithValue(ctx, requestLogKey{}, note)
}

// NoteRequest reports one request to ctx's request log, if it has one;
// package s3lock's request layer calls it for every request.
func NoteRequest(ctx context.Context, op string, err error) {
	if note, ok := ctx.Value(requestLogKey{}).(func(string, error)); ok {
		note(op, err)
	}
}
