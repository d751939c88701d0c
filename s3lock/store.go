package s3lock

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3lock/terraform-provider-s3lock/s3lock/internal/bridge"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// This file holds the only code that talks to S3: every request goes
// through request (one per-request timeout, errors classified as *opError
// naming the bucket and key), one function per kind of request.

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

// requester makes the S3 requests of one bucket. Every request of the
// package goes through request, so each is bounded by the same per-request
// timeout, noted for storecheck (bridge.NoteRequest), and fails with an *opError that names the
// operation, bucket and key and matches its class's sentinel.
type requester struct {
	api     S3API
	bucket  string
	timeout time.Duration
	obs     observe.Observer // nil: nobody listens
	clock   Clock
}

func (c *Client) requester() requester {
	return requester{api: c.api, bucket: c.bucket, timeout: c.cfg.requestTimeout, obs: c.cfg.observer, clock: c.cfg.clock}
}

// request makes one S3 call: call runs with a context that ends after the
// request timeout (a timeout that is not ctx's own is marked as such, so it
// classifies as transient), and its error is wrapped as an *opError for op
// and key. Errors that are already s3lock's (*opError, *corruptLeaseError)
// are returned as they are.
func request[T any](ctx context.Context, r requester, op, key string, call func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var start time.Time
	if r.obs != nil {
		start = r.clock.Now()
	}
	out, err := call(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = &requestTimeout{after: r.timeout, err: err}
	}
	if err != nil {
		err = r.opError(op, key, err)
	}
	bridge.NoteRequest(ctx, op, err) // for storecheck
	if r.obs != nil {
		r.obs.Observe(observe.Event{Kind: observe.Request, Bucket: r.bucket, Key: key, Op: op, Outcome: outcomeOf(err),
			Duration: r.clock.Now().Sub(start)})
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// opError wraps an S3 error with its operation, bucket and key.
func (r requester) opError(op, key string, err error) error {
	var oe *opError
	var ce *corruptLeaseError
	if errors.As(err, &oe) || errors.As(err, &ce) {
		return err
	}
	return &opError{Op: op, Bucket: r.bucket, Key: key, Kind: kindOf(classify(err)), Err: err}
}

func (c *Client) owner() *string {
	if c.cfg.expectedBucketOwner == "" {
		return nil
	}
	return aws.String(c.cfg.expectedBucketOwner)
}

// getEpoch reads one epoch object. ifNoneMatch, when set, makes an unchanged
// object answer failNotModified. Its errors are *opError or
// *corruptLeaseError.
func (c *Client) getEpoch(ctx context.Context, key string, epoch uint64, ifNoneMatch string) (*observed, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), ExpectedBucketOwner: c.owner()}
	c.cfg.objects.onGet(in)
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	return request(ctx, c.requester(), "GetObject", key, func(ctx context.Context) (*observed, error) {
		sent := c.cfg.clock.Now()
		out, err := c.api.GetObject(ctx, in)
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		if out.ContentLength != nil && *out.ContentLength > maxPayloadBytes {
			return nil, &corruptLeaseError{Bucket: c.bucket, Key: key, etag: aws.ToString(out.ETag),
				Reason: fmt.Sprintf("it is %d bytes; a lease is at most %d", *out.ContentLength, maxPayloadBytes)}
		}
		body, err := decodePayload(out.Body, epoch) // read within the request's timeout
		if err != nil {
			var ce *corruptLeaseError
			if errors.As(err, &ce) {
				ce.Bucket, ce.Key, ce.etag = c.bucket, key, aws.ToString(out.ETag)
			}
			return nil, err
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
	})
}

// putEpoch writes an epoch object: create-only when etag is empty
// (If-None-Match: *), compare-and-swap on etag otherwise (If-Match). It
// returns the new ETag.
func (c *Client) putEpoch(ctx context.Context, key, etag string, body []byte) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:              aws.String(c.bucket),
		Key:                 aws.String(key),
		Body:                bytes.NewReader(body),
		ContentLength:       aws.Int64(int64(len(body))),
		ContentType:         aws.String("application/json"),
		CacheControl:        aws.String("no-store"),
		ExpectedBucketOwner: c.owner(),
	}
	c.cfg.objects.onPut(in)
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := request(ctx, c.requester(), "PutObject", key, func(ctx context.Context) (*s3.PutObjectOutput, error) {
		return c.api.PutObject(ctx, in)
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// listed is one page of a lock's epoch objects, in ascending epoch order.
type listed struct {
	epochs    []listedEpoch
	foreign   int // keys under the prefix that are not epoch objects
	truncated bool
	next      string    // its continuation token: paging goes on from it only past pages that list nothing
	lastKey   string    // the page's last key, epoch object or not
	date      time.Time // the store's clock when it answered
	// line is set when the page shows the lock's line (its tickets' common
	// prefix): someone waits, or waited, in order.
	line bool
}

type listedEpoch struct {
	key          string
	epoch        uint64
	etag         string
	lastModified time.Time
	size         int64 // its size code says what it is (judgeListed)
}

func (l *listed) newest() (listedEpoch, bool) {
	if len(l.epochs) == 0 {
		return listedEpoch{}, false
	}
	return l.epochs[len(l.epochs)-1], true
}

// listEpochs lists up to one page of epoch objects of the lock name with keys
// after startAfter ("" for the first). On a directory bucket it lists them
// all (listEpochsWhole).
func (c *Client) listEpochs(ctx context.Context, name, startAfter string) (*listed, error) {
	return c.listEpochPage(ctx, name, startAfter, "")
}

// listEpochPage is listEpochs, going on from a continuation token when one
// is given (the listing after startAfter whose earlier page it ended).
func (c *Client) listEpochPage(ctx context.Context, name, startAfter, token string) (*listed, error) {
	if c.directory {
		return c.listEpochsWhole(ctx, name, startAfter)
	}
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
	switch {
	case token != "":
		in.ContinuationToken = aws.String(token)
	case startAfter != "":
		in.StartAfter = aws.String(startAfter)
	}
	out, err := c.list(ctx, prefix, in)
	if err != nil {
		return nil, err
	}
	if token != "" && aws.ToString(out.NextContinuationToken) == token {
		return nil, c.repeatedToken(prefix, token)
	}
	if err := c.checkStartAfter(prefix, startAfter, token, out); err != nil {
		return nil, err
	}
	l := &listed{truncated: aws.ToBool(out.IsTruncated), next: aws.ToString(out.NextContinuationToken), date: responseDate(out.ResultMetadata)}
	l.add(name, "", out)
	// Stores return keys in ascending order, and zero-padded epochs sort
	// like numbers; sort anyway in case a store does not.
	sortEpochs(l.epochs)
	return l, nil
}

// listEpochsWhole is listEpochs on a store whose listing follows no key
// order and ignores StartAfter (an S3 directory bucket, which also lists
// only prefixes that end in "/"): it lists the lock's directory "<name>/"
// page by page with continuation tokens, keeps the epochs after startAfter,
// and returns them as one page that is not truncated, so that the newest is
// found without trusting any order. Its cost is one LIST per thousand keys
// and common prefixes directly under "<name>/" (epochs, the line, the
// slots, each nested lock's directory): with history cleanup, one.
func (c *Client) listEpochsWhole(ctx context.Context, name, startAfter string) (*listed, error) {
	prefix := name + "/"
	in := &s3.ListObjectsV2Input{Bucket: aws.String(c.bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/"),
		MaxKeys: aws.Int32(pageSize), ExpectedBucketOwner: c.owner()}
	l := &listed{}
	first := true
	err := c.pages(ctx, prefix, in, func(out *s3.ListObjectsV2Output) bool {
		if first {
			l.date, first = responseDate(out.ResultMetadata), false
		}
		l.add(name, startAfter, out)
		return true // to the end: any page may hold the newest epoch
	})
	if err != nil {
		return nil, err
	}
	sortEpochs(l.epochs)
	return l, nil
}

// add adds a listing page of the lock name's keys to l: its epochs after
// startAfter ("" for all), whether it shows the line, and how many other
// keys and common prefixes it holds.
func (l *listed) add(name, startAfter string, out *s3.ListObjectsV2Output) {
	for _, cp := range out.CommonPrefixes {
		// A nested lock's keys, or the line's tickets: skip past all of
		// them when paging on.
		if aws.ToString(cp.Prefix) == linePrefix(name) {
			l.line = true
		} else {
			l.foreign++
		}
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
		if key <= startAfter {
			continue
		}
		l.epochs = append(l.epochs, listedEpoch{key: key, epoch: epoch, etag: aws.ToString(obj.ETag),
			lastModified: aws.ToTime(obj.LastModified), size: aws.ToInt64(obj.Size)})
	}
}

// listLine lists every ticket in the line of the lock name, in key order (the
// order of service), page by page; the view's date is the first page's.
func (c *Client) listLine(ctx context.Context, name string) (*lineView, error) {
	prefix := linePrefix(name)
	in := &s3.ListObjectsV2Input{Bucket: aws.String(c.bucket), Prefix: aws.String(prefix),
		MaxKeys: aws.Int32(pageSize), ExpectedBucketOwner: c.owner()}
	v := &lineView{}
	first := true
	err := c.pages(ctx, prefix, in, func(out *s3.ListObjectsV2Output) bool {
		if first {
			v.date, v.received, first = responseDate(out.ResultMetadata), c.cfg.clock.Now(), false
		}
		for _, obj := range out.Contents {
			if ref, ok := parseTicket(name, aws.ToString(obj.Key)); ok {
				v.tickets = append(v.tickets, listedTicket{ticketRef: ref, etag: aws.ToString(obj.ETag),
					lastModified: aws.ToTime(obj.LastModified)})
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(v.tickets, func(a, b listedTicket) int { return cmp.Compare(a.key, b.key) })
	return v, nil
}

// getTicket reads one ticket of a lock's line. Its errors are *opError or
// *corruptLeaseError.
func (c *Client) getTicket(ctx context.Context, key string) (*ticketObs, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), ExpectedBucketOwner: c.owner()}
	c.cfg.objects.onGet(in)
	return request(ctx, c.requester(), "GetObject", key, func(ctx context.Context) (*ticketObs, error) {
		out, err := c.api.GetObject(ctx, in)
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		data, err := io.ReadAll(io.LimitReader(out.Body, maxPayloadBytes+1))
		if err != nil {
			return nil, err
		}
		body, err := parseTicketBody(data)
		if err != nil {
			var ce *corruptLeaseError
			if errors.As(err, &ce) {
				ce.Bucket, ce.Key, ce.etag = c.bucket, key, aws.ToString(out.ETag)
			}
			return nil, err
		}
		return &ticketObs{etag: aws.ToString(out.ETag), body: body}, nil
	})
}

// list makes one ListObjectsV2 request; prefix names it in errors.
func (c *Client) list(ctx context.Context, prefix string, in *s3.ListObjectsV2Input) (*s3.ListObjectsV2Output, error) {
	return request(ctx, c.requester(), "ListObjectsV2", prefix, func(ctx context.Context) (*s3.ListObjectsV2Output, error) {
		return c.api.ListObjectsV2(ctx, in)
	})
}

// listedKey is one key of a listing, with its page's Date (zero if the store
// sent none).
type listedKey struct {
	key          string
	etag         string
	size         int64
	lastModified time.Time
	date         time.Time
}

// listKeys calls fn with every key under prefix, page by page. A directory
// bucket lists only prefixes that end in "/": there it lists the directory
// the prefix is in and leaves out the keys outside the prefix.
func (c *Client) listKeys(ctx context.Context, prefix string, fn func(listedKey)) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(c.bucket), ExpectedBucketOwner: c.owner()}
	asked := prefix
	if c.directory {
		asked = prefix[:strings.LastIndex(prefix, "/")+1]
	}
	if asked != "" {
		in.Prefix = aws.String(asked)
	}
	return c.pages(ctx, asked, in, func(out *s3.ListObjectsV2Output) bool {
		date := responseDate(out.ResultMetadata)
		for _, o := range out.Contents {
			if key := aws.ToString(o.Key); strings.HasPrefix(key, prefix) {
				fn(listedKey{key: key, etag: aws.ToString(o.ETag), size: aws.ToInt64(o.Size), lastModified: aws.ToTime(o.LastModified), date: date})
			}
		}
		return true
	})
}

// deleteKeys deletes keys in batches of up to 1,000 (one DeleteObjects each).
// A key the store refused to delete fails the call with the store's code
// for that key.
func (c *Client) deleteKeys(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		batch := keys[:n]
		keys = keys[n:]
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		in := &s3.DeleteObjectsInput{
			Bucket:              aws.String(c.bucket),
			Delete:              &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			ExpectedBucketOwner: c.owner(),
		}
		_, err := request(ctx, c.requester(), "DeleteObjects", batch[0], func(ctx context.Context) (*s3.DeleteObjectsOutput, error) {
			out, err := c.api.DeleteObjects(ctx, in)
			if err == nil && len(out.Errors) > 0 {
				e := out.Errors[0]
				err = &keyError{key: aws.ToString(e.Key), code: aws.ToString(e.Code), message: aws.ToString(e.Message)}
			}
			return out, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// keyError is a per-key failure inside a successful DeleteObjects answer. It
// is an smithy.APIError, so it classifies by its code.
type keyError struct{ key, code, message string }

func (e *keyError) Error() string                 { return e.key + ": " + e.code + ": " + e.message }
func (e *keyError) ErrorCode() string             { return e.code }
func (e *keyError) ErrorMessage() string          { return e.message }
func (e *keyError) ErrorFault() smithy.ErrorFault { return smithy.FaultUnknown }

// headKey reads one object's metadata.
func (c *Client) headKey(ctx context.Context, key string) (*s3.HeadObjectOutput, error) {
	in := &s3.HeadObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), ExpectedBucketOwner: c.owner()}
	c.cfg.objects.onHead(in)
	return request(ctx, c.requester(), "HeadObject", key, func(ctx context.Context) (*s3.HeadObjectOutput, error) {
		return c.api.HeadObject(ctx, in)
	})
}

// deleteKey deletes one object.
func (c *Client) deleteKey(ctx context.Context, key string) error {
	in := &s3.DeleteObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), ExpectedBucketOwner: c.owner()}
	_, err := request(ctx, c.requester(), "DeleteObject", key, func(ctx context.Context) (*s3.DeleteObjectOutput, error) {
		return c.api.DeleteObject(ctx, in)
	})
	return err
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
