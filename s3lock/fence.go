package s3lock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// FenceMetadataKey is the user-metadata key (x-amz-meta-s3lock-epoch) in which
// FencedPut records the epoch that last wrote an object.
const FenceMetadataKey = "s3lock-epoch"

// maxFenceAttempts bounds how often FencedPut re-reads an object that other
// writers keep changing.
const maxFenceAttempts = 10

// FencedPut writes the object described by in only if no newer epoch has
// written it: it reads the epoch recorded in the object's metadata
// (FenceMetadataKey) and its ETag, refuses with a *FencedError (matching
// ErrStaleEpoch) if that epoch is newer than epoch, and otherwise writes with
// the caller's epoch recorded, conditional on the ETag it read (If-Match) or
// on the object not existing (If-None-Match). A concurrent write makes it
// read and decide again. So a former holder that paused past the end of its
// lease cannot overwrite what a newer holder wrote, as long as every writer
// of the object uses FencedPut.
//
// The body is sent more than once if the object changes under it: an
// io.ReadSeeker is rewound, any other reader is read into memory first. The
// caller's in is not modified; it must not set IfMatch or IfNoneMatch. ctx
// bounds the whole call. FencedPut needs s3:GetObject and s3:PutObject on
// the key.
func FencedPut(ctx context.Context, api S3API, epoch uint64, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	if api == nil || in == nil || aws.ToString(in.Bucket) == "" || aws.ToString(in.Key) == "" {
		return nil, invalid("FencedPut needs an S3 client and an input with Bucket and Key")
	}
	if in.IfMatch != nil || in.IfNoneMatch != nil {
		return nil, invalid("FencedPut sets If-Match / If-None-Match itself; leave them unset in the input")
	}
	if err := validateEpoch(epoch); err != nil {
		return nil, err
	}
	bucket, key := aws.ToString(in.Bucket), aws.ToString(in.Key)
	wrap := func(op string, err error) error {
		return &OpError{Op: op, Bucket: bucket, Key: key, Kind: kindOf(classify(err)), Err: err}
	}
	body, start, err := rewindable(in.Body)
	if err != nil {
		return nil, fmt.Errorf("s3lock: reading the body for s3://%s/%s: %w", bucket, key, err)
	}
	for range maxFenceAttempts {
		head, err := api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key, ExpectedBucketOwner: in.ExpectedBucketOwner})
		put := *in
		put.IfMatch, put.IfNoneMatch = nil, nil
		switch {
		case classify(err) == failNotFound:
			put.IfNoneMatch = aws.String("*")
		case err != nil:
			return nil, wrap("HeadObject", err)
		default:
			current, _ := strconv.ParseUint(head.Metadata[FenceMetadataKey], 10, 64)
			if current > epoch {
				return nil, &FencedError{Bucket: bucket, Key: key, Epoch: epoch, Current: current}
			}
			put.IfMatch = head.ETag
		}
		put.Metadata = make(map[string]string, len(in.Metadata)+1)
		for k, v := range in.Metadata {
			put.Metadata[k] = v
		}
		put.Metadata[FenceMetadataKey] = strconv.FormatUint(epoch, 10)
		if body != nil {
			if _, err := body.Seek(start, io.SeekStart); err != nil {
				return nil, fmt.Errorf("s3lock: rewinding the body for s3://%s/%s: %w", bucket, key, err)
			}
			put.Body = body
		}
		out, err := api.PutObject(ctx, &put)
		switch f := classify(err); {
		case err == nil:
			return out, nil
		case f == failPrecondition, f == failConflict, f == failNotFound:
			continue // written or deleted meanwhile: decide again
		default:
			return nil, wrap("PutObject", err)
		}
	}
	return nil, &OpError{Op: "FencedPut", Bucket: bucket, Key: key, Kind: ErrUnavailable,
		Err: errors.New("the object kept changing while writing it")}
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
