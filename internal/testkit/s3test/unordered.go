package s3test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// UnorderedListings is an S3 client (an s3lock.S3API) that lists as an S3 directory bucket
// may: AWS documents that directory buckets do not return keys in
// lexicographical order and do not support StartAfter. It lists the whole
// prefix from the store behind it, reverses the keys (the order a test can
// rely on to be wrong), ignores StartAfter, and cuts pages of MaxKeys with
// continuation tokens of its own. Listings with a delimiter pass through
// unchanged (an emulation of the listing order only, not of a directory
// bucket's delimiter rules).
type UnorderedListings struct {
	*s3.Client
}

const unorderedToken = "unordered-"

// ListObjectsV2 lists as described on UnorderedListings.
func (u UnorderedListings) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	if aws.ToString(in.Delimiter) != "" {
		return u.Client.ListObjectsV2(ctx, in, opts...)
	}
	offset := 0
	if tok := aws.ToString(in.ContinuationToken); tok != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, unorderedToken))
		if err != nil || !strings.HasPrefix(tok, unorderedToken) {
			return nil, fmt.Errorf("s3test: UnorderedListings: continuation token %q is not one of its own", tok)
		}
		offset = n
	}
	var all []types.Object
	up := &s3.ListObjectsV2Input{Bucket: in.Bucket, Prefix: in.Prefix, ExpectedBucketOwner: in.ExpectedBucketOwner}
	for {
		out, err := u.Client.ListObjectsV2(ctx, up, opts...)
		if err != nil {
			return nil, err
		}
		all = append(all, out.Contents...)
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			break
		}
		up.ContinuationToken = out.NextContinuationToken
	}
	slices.Reverse(all)
	size := int(aws.ToInt32(in.MaxKeys))
	if size <= 0 {
		size = 1000
	}
	offset = min(offset, len(all))
	end := min(offset+size, len(all))
	out := &s3.ListObjectsV2Output{Name: in.Bucket, Prefix: in.Prefix, MaxKeys: aws.Int32(int32(size)),
		Contents: all[offset:end], KeyCount: aws.Int32(int32(end - offset)), IsTruncated: aws.Bool(end < len(all))}
	if end < len(all) {
		out.NextContinuationToken = aws.String(unorderedToken + strconv.Itoa(end))
	}
	return out, nil
}
