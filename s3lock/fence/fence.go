// Package fence writes S3 objects only if no newer lease wrote them: the
// lease's epoch is its fencing token (see package s3lock), and Put records
// it on the object and refuses a write under an older one. Whatever an
// s3lock lease protects can so refuse a holder that paused past the end of
// its lease; the Terraform state store writes its states with it.
//
// PROTOCOL.md §9, beside package s3lock, has the argument and its limits.
package fence

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/transfer"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/internal/bridge"
)

// fenceEpochKey is the user-metadata key (x-amz-meta-s3lock-epoch) in which
// Put records the epoch that last wrote an object.
const fenceEpochKey = "s3lock-epoch"

// fenceWriteKey is the user-metadata key (x-amz-meta-s3lock-write) in which
// Put records a random id of the call that wrote the object: a HEAD
// that finds its own id knows its write landed, whoever else wrote the same
// bytes under the same epoch.
const fenceWriteKey = "s3lock-write"

// Put writes the object described by in only if no newer epoch has
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
// Read-modify-write: Put conditions its write on the object as its own
// HEAD finds it, so on its own it does not protect an update computed from
// an earlier read (a write landing between the read and the HEAD would be
// overwritten). Set in.IfMatch to the ETag the caller read (or
// in.IfNoneMatch to "*" if it read the object absent): Put then writes
// only over that state, and otherwise refuses with ErrObjectChanged
// (or ErrFenced when a newer epoch made the change).
// A PUT of this call whose answer was lost (a timeout, a 5xx, a 412 to the
// SDK's retry of it) is looked for with a HEAD: each write records a random
// id of its call in the object's metadata (x-amz-meta-s3lock-write), and a
// HEAD that finds it knows the write landed.
//
// What it protects: once a write under an epoch succeeded, no Put
// under an older epoch lands on the object, as long as every writer of the
// object uses Put, nothing deletes it, and no body written under an
// epoch equals one written under an older epoch. Put can check that
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
// request gives up after the client's request timeout (s3lock.WithRequestTimeout),
// each PUT after that plus 8 s per MiB of its body (a steady 128 KiB/s), so
// that a large body on a slow link is not cut off; a store that never answers fails the
// call with an error matching s3lock.ErrUnavailable. Put needs
// s3:GetObject and s3:PutObject on the key.
//
// The object may be in any bucket; in the client's own bucket, an input
// without ExpectedBucketOwner gets the client's (s3lock.WithExpectedBucketOwner). An
// input that sets no encryption gets the client's (s3lock.WithServerSideEncryption,
// s3lock.WithSSECustomerKey), and one without an ACL the client's (s3lock.WithACL); its
// HEAD carries the input's SSE-C key. Every refusal is an *Error.
func Put(ctx context.Context, client *s3lock.Client, epoch uint64, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	if client == nil || in == nil {
		return nil, invalid("fence.Put needs a client and an input")
	}
	c := bridge.Of(client)
	cp := *in
	c.PutDefaults(&cp) // the client's owner, encryption and ACL, unless in sets its own
	in = &cp
	if err := checkInput(epoch, in); err != nil {
		return nil, err
	}
	w := &write{c: c, bucket: aws.ToString(in.Bucket), key: aws.ToString(in.Key), epoch: epoch, id: bridge.RandomHex(8),
		rmw: in.IfMatch != nil || in.IfNoneMatch != nil, expected: aws.ToString(in.IfMatch)}
	extra, err := w.takeBody(in)
	if err != nil {
		return nil, err
	}
	var lastErr error // a transient failure of the last PUT
	for range maxAttempts {
		put, landed, err := w.condition(ctx, in)
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
		out, err := bridge.Do(ctx, c, w.request("PutObject", extra), func(ctx context.Context) (*s3.PutObjectOutput, error) {
			return c.API().PutObject(ctx, &put)
		})
		switch f := bridge.ClassOf(err); {
		case err == nil:
			return out, nil
		case f == bridge.Precondition, f == bridge.Conflict, f == bridge.NotFound:
			continue // written or deleted meanwhile: decide again
		case f == bridge.Transient:
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
	return nil, fmt.Errorf("%w: fenced write to s3://%s/%s: the object kept changing while writing it (%d attempts); retry later",
		s3lock.ErrUnavailable, w.bucket, w.key, maxAttempts)
}

// maxAttempts bounds how often Put re-reads an object that other writers
// keep changing.
const maxAttempts = 10

// request names one request of the write; extra is added to the client's
// request timeout.
func (w *write) request(op string, extra time.Duration) bridge.Request {
	return bridge.Request{Op: op, Bucket: w.bucket, Key: w.key, Extra: extra}
}

// invalid is an error matching s3lock.ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", s3lock.ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// checkInput refuses what Put cannot write: an input without Bucket and
// Key, conditions it does not take, an epoch no lease has.
func checkInput(epoch uint64, in *s3.PutObjectInput) error {
	if aws.ToString(in.Bucket) == "" || aws.ToString(in.Key) == "" {
		return invalid("fence.Put needs an input with Bucket and Key")
	}
	switch {
	case in.IfMatch != nil && in.IfNoneMatch != nil:
		return invalid("fence.Put: set IfMatch (the ETag you read) or IfNoneMatch (\"*\": you read it absent), not both")
	case in.IfNoneMatch != nil && aws.ToString(in.IfNoneMatch) != "*":
		return invalid("fence.Put: IfNoneMatch may only be \"*\" (you read the object absent), not %q", aws.ToString(in.IfNoneMatch))
	case in.IfMatch != nil && aws.ToString(in.IfMatch) == "":
		return invalid("fence.Put: IfMatch is empty; set it to the ETag you read")
	}
	if epoch == 0 || epoch > s3lock.MaxEpoch {
		return invalid("epoch %d is outside [1, %d]", epoch, s3lock.MaxEpoch)
	}
	return nil
}

// takeBody makes the write's body rewindable and returns how much longer
// than the client's request timeout its PUTs are given: the PUT carries the
// body, so its timeout grows with it. The fence holds however long the
// upload takes on a store that checks If-Match when the upload completes,
// as S3 does (PROTOCOL.md §15, Bounds).
func (w *write) takeBody(in *s3.PutObjectInput) (time.Duration, error) {
	var err error
	if w.body, w.start, err = rewindable(in.Body); err != nil {
		return 0, w.bodyError("reading", err)
	}
	if w.body == nil {
		return 0, nil
	}
	end, err := w.body.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, w.bodyError("measuring", err)
	}
	return transfer.Allowance(end - w.start), nil
}

// condition HEADs the object and returns the PUT of in to make, conditional
// on what it found (the fence's check, and the caller's If-Match), or, when
// an earlier attempt of this call landed, its answer (landed).
func (w *write) condition(ctx context.Context, in *s3.PutObjectInput) (put s3.PutObjectInput, landed *s3.PutObjectOutput, err error) {
	// SSE-C objects can only be read with their key: the HEAD carries the write's.
	headIn := &s3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key, ExpectedBucketOwner: in.ExpectedBucketOwner,
		SSECustomerAlgorithm: in.SSECustomerAlgorithm, SSECustomerKey: in.SSECustomerKey, SSECustomerKeyMD5: in.SSECustomerKeyMD5}
	head, err := bridge.Do(ctx, w.c, w.request("HeadObject", 0), func(ctx context.Context) (*s3.HeadObjectOutput, error) {
		return w.c.API().HeadObject(ctx, headIn)
	})
	put = *in
	put.IfMatch, put.IfNoneMatch = nil, nil
	switch {
	case bridge.ClassOf(err) == bridge.NotFound:
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
func (w *write) stamp(put, in *s3.PutObjectInput) error {
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

// write is what Put knows about the write it is making.
type write struct {
	c           bridge.Client
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

func (w *write) changed(found string) error {
	return &Error{Err: ErrObjectChanged, Bucket: w.bucket, Key: w.key, Epoch: w.epoch, Expected: w.expected, Found: found, MayHaveWritten: w.sent}
}

// admit returns why the write must not replace the object head describes:
// an *Error (ErrFenced or ErrIdenticalRewrite). It returns nil if the write
// may go ahead.
func (w *write) admit(head *s3.HeadObjectOutput) error {
	current, _ := strconv.ParseUint(head.Metadata[fenceEpochKey], 10, 64)
	etag := strings.Trim(aws.ToString(head.ETag), `"`)
	switch {
	case current > w.epoch:
		return &Error{Err: ErrFenced, Bucket: w.bucket, Key: w.key, Epoch: w.epoch, Current: current}
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
		return &Error{Err: ErrIdenticalRewrite, Bucket: w.bucket, Key: w.key, Epoch: w.epoch, Current: current}
	}
	return nil
}

// bodyMD5 returns the hex MD5 of the body from its start, streaming it once.
func (w *write) bodyMD5() (string, error) {
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

func (w *write) bodyError(doing string, err error) error {
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
