package s3lock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// ignoringStore is a store that accepts conditional headers and ignores
// them, like some S3-compatible servers: it drops them before they are
// signed and sent to the real server.
type ignoringStore struct {
	s3lock.S3API
	dropIfNoneMatch, dropIfMatch bool
}

func (s ignoringStore) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	cp := *in
	if s.dropIfNoneMatch {
		cp.IfNoneMatch = nil
	}
	if s.dropIfMatch {
		cp.IfMatch = nil
	}
	return s.S3API.PutObject(ctx, &cp, opts...)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	cases := []struct {
		name string
		api  s3lock.S3API
		ok   bool
	}{
		{"real store", ns.Client, true},
		{"store ignoring If-None-Match", ignoringStore{S3API: ns.Client, dropIfNoneMatch: true}, false},
		{"store ignoring If-Match", ignoringStore{S3API: ns.Client, dropIfMatch: true}, false},
		{"store ignoring both", ignoringStore{S3API: ns.Client, dropIfNoneMatch: true, dropIfMatch: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s3lock.New(tc.api, ns.Bucket, s3lock.WithProbePrefix(ns.Name(s3lock.DefaultProbePrefix)))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Verify(t.Context())
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Verify = %v; want nil", err)
			case !tc.ok && !errors.Is(err, s3lock.ErrConditionalWritesUnsupported):
				t.Fatalf("Verify = %v; want ErrConditionalWritesUnsupported", err)
			}
			if keys := s3test.Keys(t, ns.Client, ns.Bucket, ns.Name("probe/")); len(keys) != 0 {
				t.Errorf("Verify left probe objects behind: %v", keys)
			}
		})
	}
}
