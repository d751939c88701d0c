package s3test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
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

// EnvRequireS3rver, set to 1, lets StartStore install s3rver from the npm
// registry and makes a store that cannot run here a failure instead of a
// skip (make test-stores and CI set it). Without it an s3rver installed
// before (make stores) is used or the test skips, so that a plain test run
// needs no network but the Go module proxy.
const EnvRequireS3rver = "S3LOCK_TEST_S3RVER"

// StartStore starts a store of kind on dir for the rest of the test (a fresh
// temporary directory when dir is empty), skipping the test when the store
// cannot run on this machine (see EnvRequireS3rver).
func StartStore(tb testing.TB, kind s3server.Kind, dir string) s3server.Store {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	required := os.Getenv(EnvRequireS3rver) == "1"
	ctx, cancel := context.WithTimeout(tb.Context(), 15*time.Minute) // a first build of MinIO or SeaweedFS
	defer cancel()
	st, err := s3server.StartStore(ctx, kind, s3server.StoreOptions{Dir: dir, NoInstall: !required})
	if errors.Is(err, s3server.ErrUnavailable) && !required {
		tb.Skipf("%s cannot run here (%v); %s=1 makes this a failure", kind, err, EnvRequireS3rver)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Stop)
	return st
}
