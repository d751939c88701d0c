package awsclient_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// testSSECKey is the base64 of a 32-byte SSE-C key.
var testSSECKey = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// putRecorder is an S3API that records the first PutObject and fails it (and
// every read), so a lock attempt shows what it would have written.
type putRecorder struct {
	s3lock.S3API
	put *s3.PutObjectInput
}

var errStop = errors.New("stop")

func (r *putRecorder) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if r.put == nil {
		r.put = in
	}
	return nil, errStop
}

func (r *putRecorder) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, errStop
}

func (r *putRecorder) HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	return nil, errStop
}

// ListObjectsV2 finds no lock objects, so an acquisition goes on to write.
func (r *putRecorder) ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	return &s3.ListObjectsV2Output{}, nil
}

// TestObjectSettings_Options specifies the S3 backend's meanings: encrypt
// alone is SSE-S3, encrypt with kms_key_id is SSE-KMS, sse_customer_key is
// SSE-C, acl is a canned ACL.
func TestObjectSettings_Options(t *testing.T) {
	tests := []struct {
		name     string
		settings awsclient.ObjectSettings
		sse      types.ServerSideEncryption
		kmsKey   string
		ssec     bool
		acl      types.ObjectCannedACL
	}{
		{name: "nothing set writes plain objects"},
		{name: "encrypt is SSE-S3", settings: awsclient.ObjectSettings{Encrypt: true}, sse: types.ServerSideEncryptionAes256},
		{name: "encrypt with a KMS key is SSE-KMS", settings: awsclient.ObjectSettings{Encrypt: true, KMSKeyID: "alias/locks"},
			sse: types.ServerSideEncryptionAwsKms, kmsKey: "alias/locks"},
		{name: "a customer key is SSE-C", settings: awsclient.ObjectSettings{SSECustomerKey: testSSECKey}, ssec: true},
		{name: "acl", settings: awsclient.ObjectSettings{ACL: "bucket-owner-full-control"}, acl: types.ObjectCannedACLBucketOwnerFullControl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := tt.settings.Options()
			if err != nil {
				t.Fatal(err)
			}
			rec := &putRecorder{}
			c, err := s3lock.New(rec, "bucket", opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.TryAcquire(t.Context(), "lock")
			if rec.put == nil {
				t.Fatal("no PutObject was attempted")
			}
			in := rec.put
			if in.ServerSideEncryption != tt.sse || aws.ToString(in.SSEKMSKeyId) != tt.kmsKey || in.ACL != tt.acl {
				t.Errorf("put with SSE %q, KMS key %q, ACL %q; want %q, %q, %q",
					in.ServerSideEncryption, aws.ToString(in.SSEKMSKeyId), in.ACL, tt.sse, tt.kmsKey, tt.acl)
			}
			if got := aws.ToString(in.SSECustomerKey) == testSSECKey; got != tt.ssec {
				t.Errorf("SSE-C key sent: %v, want %v", got, tt.ssec)
			}
		})
	}
}

// TestObjectSettings_Invalid specifies the refusals, and that none of them
// shows the customer key.
func TestObjectSettings_Invalid(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("sixteen-byte-key"))
	tests := []struct {
		name     string
		settings awsclient.ObjectSettings
		is       error
		says     string
	}{
		{name: "a KMS key without encrypt", settings: awsclient.ObjectSettings{KMSKeyID: "alias/locks"},
			is: awsclient.ErrInvalidOptions, says: "encryption is not turned on"},
		{name: "a customer key that is not base64", settings: awsclient.ObjectSettings{SSECustomerKey: "not*base64!"},
			is: awsclient.ErrInvalidOptions, says: "not valid base64"},
		{name: "a customer key of 16 bytes", settings: awsclient.ObjectSettings{SSECustomerKey: short},
			is: s3lock.ErrInvalidConfig, says: "32 bytes"},
		{name: "a customer key with encrypt", settings: awsclient.ObjectSettings{Encrypt: true, SSECustomerKey: testSSECKey},
			is: s3lock.ErrInvalidConfig, says: "exclude each other"},
		{name: "an unknown ACL", settings: awsclient.ObjectSettings{ACL: "owner-only"},
			is: s3lock.ErrInvalidConfig, says: "bucket-owner-full-control"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.settings.Options()
			if !errors.Is(err, tt.is) {
				t.Fatalf("error %v, want %v", err, tt.is)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.says) {
				t.Errorf("error %q does not say %q", msg, tt.says)
			}
			if key := tt.settings.SSECustomerKey; key != "" && strings.Contains(msg, key) {
				t.Errorf("error %q shows the customer key", msg)
			}
		})
	}
}
