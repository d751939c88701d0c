package s3lock

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// This file holds the only code that talks to S3: one function per kind of
// request, each returning errors classified for the protocol.

// failure classifies an S3 error for the protocol.
type failure int

const (
	failOther        failure = iota
	failPrecondition         // 412: a conditional header did not hold
	failNotFound             // 404 NoSuchKey
	failNotModified          // 304: unchanged since the ETag we hold
	failConflict             // 409: a conflicting conditional request is in progress
	failTransient            // 5xx, throttling, timeouts, connection errors, retry quota
	failAccessDenied         // 403
	failNoSuchBucket         // 404 NoSuchBucket
	failCanceled             // the caller's context ended
	failUnsupported          // 501: the store does not implement the request (e.g. conditional writes)
	failCredentials          // the SDK could not sign the request: no usable credentials
)

func classify(err error) failure {
	if err == nil {
		return failOther
	}
	var timeout *requestTimeout
	if errors.As(err, &timeout) {
		return failTransient
	}
	if credentialsFailure(err) {
		return failCredentials
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return failCanceled // the caller's context ended
	}
	code, status := errorCode(err)
	switch {
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
		return failPrecondition
	case status == http.StatusNotImplemented || code == "NotImplemented":
		return failUnsupported
	case status == http.StatusNotModified || code == "NotModified":
		return failNotModified
	case code == "NoSuchBucket":
		return failNoSuchBucket
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return failNotFound
	case code == "ConditionalRequestConflict" || code == "OperationAborted" || status == http.StatusConflict:
		return failConflict
	case status == http.StatusForbidden || code == "AccessDenied" || code == "InvalidAccessKeyId" ||
		code == "SignatureDoesNotMatch" || code == "ExpiredToken" || code == "InvalidToken":
		return failAccessDenied
	case status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout:
		return failTransient
	case code == "SlowDown" || code == "RequestTimeout" || code == "Throttling" || code == "RequestTimeTooSkewed":
		return failTransient
	}
	var quota ratelimit.QuotaExceededError
	var maxAttempts *retry.MaxAttemptsError
	var netErr net.Error
	switch {
	case errors.As(err, &quota), errors.As(err, &maxAttempts):
		return failTransient
	case errors.As(err, &netErr):
		return failTransient
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return failTransient
	case strings.Contains(err.Error(), "connection reset"), strings.Contains(err.Error(), "broken pipe"),
		strings.Contains(err.Error(), "retry quota exceeded"):
		return failTransient
	}
	if status == 0 && code == "" {
		// No answer from the store at all (the request never completed):
		// treat as transient; writes are resolved by reading back.
		return failTransient
	}
	return failOther
}

// credentialsFailure reports whether the SDK failed to obtain credentials for
// a request (so it was never sent). The SDK has no type for this; it wraps
// the credential provider's error as "get identity: ..." or, in older code
// paths, in a *v4.SigningError.
func credentialsFailure(err error) bool {
	var signing *v4.SigningError
	return errors.As(err, &signing) || strings.Contains(err.Error(), "get identity: ")
}

// refused reports whether a failed write certainly did not happen, and will
// not happen if retried as is: the store or the SDK refused it outright.
func (f failure) refused() bool {
	switch f {
	case failAccessDenied, failCredentials, failNoSuchBucket, failUnsupported, failOther:
		return true
	}
	return false
}

// errorCode returns the S3 error code and HTTP status of err, if it has them.
func errorCode(err error) (code string, status int) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	return code, status
}

func kindOf(f failure) error {
	switch f {
	case failTransient, failConflict:
		return ErrUnavailable
	case failAccessDenied, failCredentials:
		return ErrAccessDenied
	case failNoSuchBucket:
		return ErrNoSuchBucket
	case failUnsupported:
		return ErrConditionalWritesUnsupported
	}
	return nil
}

// opError wraps an S3 error with its operation, bucket and key.
func (c *Client) opError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Bucket: c.bucket, Key: key, Kind: kindOf(classify(err)), Err: err}
}

// describeCause turns an SDK error into a short sentence: the API error code
// and message when the store answered, the network error or timeout when it
// did not, the credential provider's complaint when there were no
// credentials; then what the SDK's retryer gave up on.
func describeCause(err error) string {
	var (
		apiErr  smithy.APIError
		timeout *requestTimeout
		netErr  *net.OpError
		msg     string
	)
	switch {
	case errors.As(err, &apiErr):
		msg = apiErr.ErrorCode()
		if m := apiErr.ErrorMessage(); m != "" {
			msg += ": " + m
		}
		var respErr *smithyhttp.ResponseError
		if errors.As(err, &respErr) {
			msg = http.StatusText(respErr.HTTPStatusCode()) + " (" + msg + ")"
		}
	case errors.As(err, &timeout):
		msg = fmt.Sprintf("no answer within %s", timeout.after)
	case errors.As(err, &netErr):
		msg = netErr.Error()
	case credentialsFailure(err):
		msg = err.Error()
		if i := strings.LastIndex(msg, "get credentials: "); i >= 0 {
			msg = msg[i+len("get credentials: "):]
		}
		msg = "no credentials: " + msg
	default:
		msg = err.Error()
	}
	var quota ratelimit.QuotaExceededError
	if errors.As(err, &quota) {
		msg += "; the SDK's retry quota exceeded, so it stopped retrying"
	}
	var attempts *retry.MaxAttemptsError
	if errors.As(err, &attempts) {
		msg += fmt.Sprintf(" (after %d attempts)", attempts.Attempt)
	}
	return msg
}

// causeText is err's message without the "s3lock: " that starts the
// package's own errors, for nesting one in another's message.
func causeText(err error) string {
	return strings.TrimPrefix(err.Error(), "s3lock: ")
}

// observed is an epoch object as read from the store.
type observed struct {
	key   string
	epoch uint64
	etag  string
	body  *payload
	// lastModified and date are both the store's clock: the object's last
	// write and the time of the response. date is zero if the store sent
	// no Date header.
	lastModified time.Time
	date         time.Time
	// sent and received are the client clock just before the request went
	// out and just after the answer came back.
	sent, received time.Time
}

// serverAge is how long ago, by the store's clock, the object was last
// written; ok is false when the store did not say.
func (o *observed) serverAge() (time.Duration, bool) {
	if o.date.IsZero() || o.lastModified.IsZero() {
		return 0, false
	}
	return o.date.Sub(o.lastModified), true
}

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.requestTimeout)
}

// requestTimeout marks an error caused by the per-request timeout
// (WithRequestTimeout) rather than by the caller's context: the store did not
// answer in time, which may pass.
type requestTimeout struct {
	after time.Duration
	err   error
}

func (e *requestTimeout) Error() string {
	return fmt.Sprintf("no answer within %s (%v)", e.after, e.err)
}

func (e *requestTimeout) Unwrap() error { return e.err }

// timedOut returns err, marked as a request timeout if cctx (the request's
// context, derived from ctx) ended while ctx did not.
func (c *Client) timedOut(ctx, cctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return &requestTimeout{after: c.cfg.requestTimeout, err: err}
	}
	return err
}

func (c *Client) owner() *string {
	if c.cfg.expectedBucketOwner == "" {
		return nil
	}
	return aws.String(c.cfg.expectedBucketOwner)
}

// getEpoch reads one epoch object. ifNoneMatch, when set, makes an unchanged
// object answer failNotModified. Its errors are *OpError or
// *CorruptLeaseError.
func (c *Client) getEpoch(ctx context.Context, key string, epoch uint64, ifNoneMatch string) (*observed, error) {
	cctx, cancel := c.withTimeout(ctx)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), ExpectedBucketOwner: c.owner()}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	sent := c.cfg.clock.Now()
	out, err := c.api.GetObject(cctx, in)
	if err != nil {
		return nil, c.opError("GetObject", key, c.timedOut(ctx, cctx, err))
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > MaxPayloadBytes {
		return nil, &CorruptLeaseError{Bucket: c.bucket, Key: key, etag: aws.ToString(out.ETag),
			Reason: fmt.Sprintf("it is %d bytes; a lease is at most %d", *out.ContentLength, MaxPayloadBytes)}
	}
	body, err := decodePayload(out.Body, epoch)
	if err != nil {
		var ce *CorruptLeaseError
		if errors.As(err, &ce) {
			ce.Bucket, ce.Key, ce.etag = c.bucket, key, aws.ToString(out.ETag)
			return nil, ce
		}
		return nil, c.opError("GetObject", key, c.timedOut(ctx, cctx, err))
	}
	return &observed{
		key:          key,
		epoch:        epoch,
		etag:         aws.ToString(out.ETag),
		body:         body,
		lastModified: aws.ToTime(out.LastModified),
		date:         responseDate(out.ResultMetadata),
		sent:         sent,
		received:     c.cfg.clock.Now(),
	}, nil
}

// putEpoch writes an epoch object: create-only when etag is empty
// (If-None-Match: *), compare-and-swap on etag otherwise (If-Match). It
// returns the new ETag.
func (c *Client) putEpoch(ctx context.Context, key, etag string, body []byte) (string, error) {
	cctx, cancel := c.withTimeout(ctx)
	defer cancel()
	in := &s3.PutObjectInput{
		Bucket:              aws.String(c.bucket),
		Key:                 aws.String(key),
		Body:                bytes.NewReader(body),
		ContentLength:       aws.Int64(int64(len(body))),
		ContentType:         aws.String("application/json"),
		CacheControl:        aws.String("no-store"),
		ExpectedBucketOwner: c.owner(),
	}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := c.api.PutObject(cctx, in)
	if err != nil {
		return "", c.opError("PutObject", key, c.timedOut(ctx, cctx, err))
	}
	return aws.ToString(out.ETag), nil
}

// listed is one page of a lock's epoch objects, in ascending epoch order.
type listed struct {
	epochs    []listedEpoch
	foreign   int // keys under the prefix that are not epoch objects
	truncated bool
	lastKey   string    // the page's last key, epoch object or not
	date      time.Time // the store's clock when it answered
}

type listedEpoch struct {
	key          string
	epoch        uint64
	etag         string
	lastModified time.Time
}

func (l *listed) newest() (listedEpoch, bool) {
	if len(l.epochs) == 0 {
		return listedEpoch{}, false
	}
	return l.epochs[len(l.epochs)-1], true
}

// listEpochs lists up to one page of epoch objects of the lock name with keys
// after startAfter ("" for the first).
func (c *Client) listEpochs(ctx context.Context, name, startAfter string) (*listed, error) {
	cctx, cancel := c.withTimeout(ctx)
	defer cancel()
	prefix := epochPrefix(name)
	in := &s3.ListObjectsV2Input{
		Bucket: aws.String(c.bucket),
		Prefix: aws.String(prefix),
		// Keys of locks nested under this one ("<name>/lock-x/...") roll
		// up into one common prefix each instead of filling the page.
		Delimiter:           aws.String("/"),
		MaxKeys:             aws.Int32(pageSize),
		ExpectedBucketOwner: c.owner(),
	}
	if startAfter != "" {
		in.StartAfter = aws.String(startAfter)
	}
	out, err := c.api.ListObjectsV2(cctx, in)
	if err != nil {
		return nil, c.opError("ListObjectsV2", prefix, c.timedOut(ctx, cctx, err))
	}
	l := &listed{truncated: aws.ToBool(out.IsTruncated), date: responseDate(out.ResultMetadata)}
	for _, cp := range out.CommonPrefixes {
		// A nested lock's keys: skip past all of them when paging on.
		l.foreign++
		l.lastKey = max(l.lastKey, aws.ToString(cp.Prefix)+string(utf8.MaxRune))
	}
	for _, obj := range out.Contents {
		key := aws.ToString(obj.Key)
		l.lastKey = max(l.lastKey, key)
		n, epoch, ok := parseKey(key)
		if !ok || n != name {
			l.foreign++
			continue
		}
		l.epochs = append(l.epochs, listedEpoch{key: key, epoch: epoch, etag: aws.ToString(obj.ETag), lastModified: aws.ToTime(obj.LastModified)})
	}
	// Stores return keys in ascending order, and zero-padded epochs sort
	// like numbers; sort anyway in case a store does not.
	sortEpochs(l.epochs)
	return l, nil
}

// deleteKeys deletes keys in batches of up to 1,000 (one DeleteObjects each).
func (c *Client) deleteKeys(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		batch := keys[:n]
		keys = keys[n:]
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		cctx, cancel := c.withTimeout(ctx)
		out, err := c.api.DeleteObjects(cctx, &s3.DeleteObjectsInput{
			Bucket:              aws.String(c.bucket),
			Delete:              &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			ExpectedBucketOwner: c.owner(),
		})
		err = c.timedOut(ctx, cctx, err)
		cancel()
		if err != nil {
			return c.opError("DeleteObjects", batch[0], err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return &OpError{Op: "DeleteObjects", Bucket: c.bucket, Key: aws.ToString(e.Key),
				Err: errors.New(aws.ToString(e.Code) + ": " + aws.ToString(e.Message))}
		}
	}
	return nil
}

// responseDate returns the Date header of a response, or the zero time.
func responseDate(md middleware.Metadata) time.Time {
	raw, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response)
	if !ok || raw == nil {
		return time.Time{}
	}
	t, err := http.ParseTime(raw.Header.Get("Date"))
	if err != nil {
		return time.Time{}
	}
	return t
}

func sortEpochs(es []listedEpoch) {
	slices.SortFunc(es, func(a, b listedEpoch) int { return cmp.Compare(a.epoch, b.epoch) })
}
