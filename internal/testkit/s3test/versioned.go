package s3test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
)

// NewVersioned returns a namespace on a versitygw server of its own whose
// bucket has versioning enabled, as a bucket with S3 Versioning on: every
// overwrite keeps the previous version, every delete leaves a delete marker.
// The server stops at the end of the test; opts shape the namespace's client
// as for New.
func NewVersioned(tb testing.TB, opts ...Option) *Namespace {
	tb.Helper()
	dir := tb.TempDir()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Minute)
	defer cancel()
	srv, err := s3server.Start(ctx, s3server.Options{Dir: filepath.Join(dir, "data"), Versioning: true})
	if err != nil {
		tb.Fatalf("s3test: starting versitygw with versioning: %v", err)
	}
	tb.Cleanup(srv.Stop)
	tg := Target{Endpoint: srv.Endpoint, Region: s3server.Region, AccessKey: s3server.AccessKeyID,
		SecretKey: s3server.SecretAccessKey, PathStyle: true, Local: true}
	client, err := BuildClient(ctx, tg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	ns := &Namespace{Client: client, Target: tg, Bucket: "s3lock-versioned-" + RandomHex(4)}
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(ns.Bucket)}); err != nil {
		tb.Fatalf("s3test: creating bucket %s: %v", ns.Bucket, err)
	}
	_, err = client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(ns.Bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		tb.Fatalf("s3test: enabling versioning on %s: %v", ns.Bucket, err)
	}
	return ns
}
