package s3lock

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// fenceEpochKey is the user-metadata key (x-amz-meta-s3lock-epoch) in which
// FencedPut records the epoch that last wrote an object.
const fenceEpochKey = "s3lock-epoch"

// fenceWriteKey is the user-metadata key (x-amz-meta-s3lock-write) in which
// FencedPut records a random id of the call that wrote the object: a HEAD
// that finds its own id knows its write landed, whoever else wrote the same
// bytes under the same epoch.
const fenceWriteKey = "s3lock-write"

// FencedPut writes the object described by in only if no newer epoch has
// written it: it reads the epoch recorded in the object's metadata
// (x-amz-meta-s3lock-epoch) and its ETag, and writes with the caller's epoch
// recorded, conditional on the ETag it read (If-Match) or on the object not
// existing (If-None-Match). A concurrent write makes it read and decide
// again.
//
// It refuses, writing nothing, in two cases:
//   - The recorded epoch is newer than epoch: ErrFenced.
//   - The recorded epoch is older than epoch and the body is the object's
//     current content (the object's ETag is the body's MD5):
//     ErrIdenticalRewrite. The epoch is metadata and S3's ETag covers
//     only the bytes, so such a write would
//     leave the ETag unchanged, and a writer of an older epoch that read
//     the object could still overwrite it afterwards. Make the body differ
//     per epoch, for example by including the epoch, and write again.
//
// The same epoch may rewrite identical bytes (a retried or re-run write).
//
// Read-modify-write: FencedPut conditions its write on the object as its own
// HEAD finds it, so on its own it does not protect an update computed from
// an earlier read (a write landing between the read and the HEAD would be
// overwritten). Set in.IfMatch to the ETag the caller read (or
// in.IfNoneMatch to "*" if it read the object absent): FencedPut then writes
// only over that state, and otherwise refuses with ErrObjectChanged
// (or ErrFenced when a newer epoch made the change).
// A PUT of this call whose answer was lost (a timeout, a 5xx, a 412 to the
// SDK's retry of it) is looked for with a HEAD: each write records a random
// id of its call in the object's metadata (x-amz-meta-s3lock-write), and a
// HEAD that finds it knows the write landed.
//
// What it protects: once a write under an epoch succeeded, no FencedPut
// under an older epoch lands on the object, as long as every writer of the
// object uses FencedPut, nothing deletes it, and no body written under an
// epoch equals one written under an older epoch. FencedPut can check that
// last condition only against the current content: a newer epoch that
// writes Y over X and then X again gives the object back an ETag that an
// older writer which read X may hold, and nothing refuses it. Bodies that
// carry their epoch rule this out. See PROTOCOL.md §9.
//
// The body is sent more than once if the object changes under it: an
// io.ReadSeeker is rewound, any other reader is read into memory first.
// When the object has an MD5 ETag and an older recorded epoch, or the call
// is a read-modify-write, the body is also read once to compute its MD5. The
// caller's in is not modified. ctx bounds the whole call, and each
// request gives up after the client's request timeout (WithRequestTimeout),
// each PUT after that plus 8 s per MiB of its body (a steady 128 KiB/s), so
// that a large body on a slow link is not cut off; a store that never answers fails the
// call with an error matching ErrUnavailable. FencedPut needs
// s3:GetObject and s3:PutObject on the key.
//
// The object may be in any bucket; in the client's own bucket, an input
// without ExpectedBucketOwner gets the client's (WithExpectedBucketOwner). An
// input that sets no encryption gets the client's (WithServerSideEncryption,
// WithSSECustomerKey), and one without an ACL the client's (WithACL); its HEAD
// carries the input's SSE-C key. Every refusal is a *FenceError.
func (c *Client) FencedPut(ctx context.Context, epoch uint64, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	if in == nil {
		return nil, invalid("FencedPut needs an input")
	}
	cp := *in
	if aws.ToString(in.Bucket) == c.bucket && in.ExpectedBucketOwner == nil {
		cp.ExpectedBucketOwner = c.owner()
	}
	c.cfg.objects.onFencedPut(&cp) // the client's encryption and ACL, unless in sets its own
	in = &cp
	r := c.requester()
	r.bucket = aws.ToString(in.Bucket)
	return fencedPut(ctx, r, epoch, in)
}

func fencedPut(ctx context.Context, r requester, epoch uint64, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	if err := checkFencedInput(epoch, in); err != nil {
		return nil, err
	}
	w := &fencedWrite{bucket: aws.ToString(in.Bucket), key: aws.ToString(in.Key), epoch: epoch, id: randomHex(8),
		rmw: in.IfMatch != nil || in.IfNoneMatch != nil, expected: aws.ToString(in.IfMatch)}
	putter, err := w.takeBody(r, in)
	if err != nil {
		return nil, err
	}
	var lastErr error // a transient failure of the last PUT
	for range maxFenceAttempts {
		put, landed, err := w.condition(ctx, r, in)
		switch {
		case err != nil:
			return nil, err
		case landed != nil:
			return landed, nil // an earlier attempt of this call landed
		}
		if err := w.stamp(&put, in); err != nil {
			return nil, err
		}
		w.sent = true
		out, err := request(ctx, putter, "PutObject", w.key, func(ctx context.Context) (*s3.PutObjectOutput, error) {
			return r.api.PutObject(ctx, &put)
		})
		switch f := classify(err); {
		case err == nil:
			return out, nil
		case f == failPrecondition, f == failConflict, f == failNotFound:
			continue // written or deleted meanwhile: decide again
		case f == failTransient:
			// It may have landed: the next HEAD tells (by this call's id).
			lastErr = err
			continue
		default:
			return nil, err
		}
	}
	if lastErr != nil {
		return nil, lastErr
	}
	return nil, &opError{Op: "FencedPut", Bucket: w.bucket, Key: w.key, Kind: ErrUnavailable,
		Err: errors.New("the object kept changing while writing it")}
}

// checkFencedInput refuses what FencedPut cannot write: an input without
// Bucket and Key, conditions it does not take, an epoch no lease has.
func checkFencedInput(epoch uint64, in *s3.PutObjectInput) error {
	if aws.ToString(in.Bucket) == "" || aws.ToString(in.Key) == "" {
		return invalid("FencedPut needs an input with Bucket and Key")
	}
	switch {
	case in.IfMatch != nil && in.IfNoneMatch != nil:
		return invalid("FencedPut: set IfMatch (the ETag you read) or IfNoneMatch (\"*\": you read it absent), not both")
	case in.IfNoneMatch != nil && aws.ToString(in.IfNoneMatch) != "*":
		return invalid("FencedPut: IfNoneMatch may only be \"*\" (you read the object absent), not %q", aws.ToString(in.IfNoneMatch))
	case in.IfMatch != nil && aws.ToString(in.IfMatch) == "":
		return invalid("FencedPut: IfMatch is empty; set it to the ETag you read")
	}
	return validateEpoch(epoch)
}

// takeBody makes the write's body rewindable and returns the requester for
// its PUTs: the PUT carries the body, so its timeout grows with it. The
// fence holds however long the upload takes on a store that checks
// If-Match when the upload completes, as S3 does (PROTOCOL.md §15, Bounds).
func (w *fencedWrite) takeBody(r requester, in *s3.PutObjectInput) (requester, error) {
	var err error
	if w.body, w.start, err = rewindable(in.Body); err != nil {
		return r, w.bodyError("reading", err)
	}
	if w.body != nil {
		end, err := w.body.Seek(0, io.SeekEnd)
		if err != nil {
			return r, w.bodyError("measuring", err)
		}
		r.timeout += transferAllowance(end - w.start)
	}
	return r, nil
}

// condition HEADs the object and returns the PUT of in to make, conditional
// on what it found (the fence's check, and the caller's If-Match), or, when
// an earlier attempt of this call landed, its answer (landed).
func (w *fencedWrite) condition(ctx context.Context, r requester, in *s3.PutObjectInput) (put s3.PutObjectInput, landed *s3.PutObjectOutput, err error) {
	// SSE-C objects can only be read with their key: the HEAD carries the write's.
	headIn := &s3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key, ExpectedBucketOwner: in.ExpectedBucketOwner,
		SSECustomerAlgorithm: in.SSECustomerAlgorithm, SSECustomerKey: in.SSECustomerKey, SSECustomerKeyMD5: in.SSECustomerKeyMD5}
	head, err := request(ctx, r, "HeadObject", w.key, func(ctx context.Context) (*s3.HeadObjectOutput, error) {
		return r.api.HeadObject(ctx, headIn)
	})
	put = *in
	put.IfMatch, put.IfNoneMatch = nil, nil
	switch {
	case classify(err) == failNotFound:
		if w.rmw && w.expected != "" {
			return put, nil, w.changed("")
		}
		put.IfNoneMatch = aws.String("*")
	case err != nil:
		return put, nil, err
	case w.sent && head.Metadata[fenceWriteKey] == w.id:
		return put, &s3.PutObjectOutput{ETag: head.ETag}, nil
	default:
		if err := w.admit(head); err != nil {
			return put, nil, err
		}
		if w.rmw && !sameETag(head.ETag, w.expected) {
			return put, nil, w.changed(aws.ToString(head.ETag))
		}
		put.IfMatch = head.ETag
	}
	return put, nil, nil
}

// stamp gives put the caller's metadata (in's) with the write's epoch and
// id, and the body rewound.
func (w *fencedWrite) stamp(put, in *s3.PutObjectInput) error {
	put.Metadata = make(map[string]string, len(in.Metadata)+1)
	for k, v := range in.Metadata {
		put.Metadata[k] = v
	}
	put.Metadata[fenceEpochKey] = strconv.FormatUint(w.epoch, 10)
	put.Metadata[fenceWriteKey] = w.id
	if w.body != nil {
		if _, err := w.body.Seek(w.start, io.SeekStart); err != nil {
			return w.bodyError("rewinding", err)
		}
		put.Body = w.body
	}
	return nil
}

// fencedWrite is what FencedPut knows about the write it is making.
type fencedWrite struct {
	bucket, key string
	epoch       uint64
	body        io.ReadSeeker // nil for an empty body
	start       int64         // the offset in body where the content starts
	sum         string        // hex MD5 of the content, once computed
	// rmw is set for a read-modify-write: write only over the state the
	// caller read, expected (its ETag; "" if it read the object absent).
	rmw      bool
	expected string
	id       string // this call's write id (fenceWriteKey)
	sent     bool   // a PutObject went out: a later HEAD may find it landed
}

// sameETag compares two ETags, quoted or not.
func sameETag(a *string, b string) bool {
	return strings.Trim(aws.ToString(a), `"`) == strings.Trim(b, `"`)
}

func (w *fencedWrite) changed(found string) error {
	return &FenceError{Err: ErrObjectChanged, Bucket: w.bucket, Key: w.key, Epoch: w.epoch, Expected: w.expected, Found: found, MayHaveWritten: w.sent}
}

// admit returns why the write must not replace the object head describes:
// a *FenceError (ErrFenced or ErrIdenticalRewrite). It returns nil if the write
// may go ahead.
func (w *fencedWrite) admit(head *s3.HeadObjectOutput) error {
	current, _ := strconv.ParseUint(head.Metadata[fenceEpochKey], 10, 64)
	etag := strings.Trim(aws.ToString(head.ETag), `"`)
	switch {
	case current > w.epoch:
		return &FenceError{Err: ErrFenced, Bucket: w.bucket, Key: w.key, Epoch: w.epoch, Current: current}
	case current == w.epoch || !isMD5Hex(etag):
		// The same epoch may rewrite anything. A multipart ETag ("-N")
		// or one that is not an MD5 cannot be the body's MD5; the
		// single-part ETag this write gets differs from a multipart one.
		return nil
	}
	sum, err := w.bodyMD5()
	if err != nil {
		return err
	}
	if strings.EqualFold(etag, sum) {
		return &FenceError{Err: ErrIdenticalRewrite, Bucket: w.bucket, Key: w.key, Epoch: w.epoch, Current: current}
	}
	return nil
}

// bodyMD5 returns the hex MD5 of the body from its start, streaming it once.
func (w *fencedWrite) bodyMD5() (string, error) {
	if w.sum != "" {
		return w.sum, nil
	}
	h := md5.New() // to compare with S3's ETag, not for security
	if w.body != nil {
		if _, err := w.body.Seek(w.start, io.SeekStart); err != nil {
			return "", w.bodyError("rewinding", err)
		}
		if _, err := io.Copy(h, w.body); err != nil {
			return "", w.bodyError("hashing", err)
		}
	}
	w.sum = hex.EncodeToString(h.Sum(nil))
	return w.sum, nil
}

func (w *fencedWrite) bodyError(doing string, err error) error {
	return fmt.Errorf("s3lock: %s the body for s3://%s/%s: %w", doing, w.bucket, w.key, err)
}

// isMD5Hex reports whether s (an unquoted ETag) looks like a hex MD5 digest,
// as the ETag of a single-part, unencrypted or SSE-S3 object is.
func isMD5Hex(s string) bool {
	if len(s) != 2*md5.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// rewindable returns r as an io.ReadSeeker and the offset the body starts
// at, reading r into memory if it is not a ReadSeeker already.
func rewindable(r io.Reader) (io.ReadSeeker, int64, error) {
	if r == nil {
		return nil, 0, nil
	}
	if rs, ok := r.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		return rs, start, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, 0, err
	}
	return bytes.NewReader(b), 0, nil
}
