package s3test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// EnsureBucket creates bucket unless the store already has it (a store
// started again on the data directory of an earlier run has).
func EnsureBucket(ctx context.Context, client *s3.Client, bucket string) error {
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err == nil {
		return nil
	}
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("creating bucket %s: %w", bucket, err)
	}
	return nil
}

// Outside lists the keys of bucket that are not under prefix: what a test
// run in a shared bucket left outside its namespaces (prefix TestPrefix).
// It also returns how many keys are under prefix.
func Outside(ctx context.Context, client *s3.Client, bucket, prefix string) (outside []string, inside int, err error) {
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("listing s3://%s: %w", bucket, err)
		}
		for _, o := range page.Contents {
			if key := aws.ToString(o.Key); strings.HasPrefix(key, prefix) {
				inside++
			} else {
				outside = append(outside, key)
			}
		}
	}
	return outside, inside, nil
}
