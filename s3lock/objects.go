package s3lock

import (
	"crypto/md5"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// objectSettings are what a client puts on every object it writes (server-
// side encryption, a canned ACL) and, for SSE-C, on every read: buckets whose
// policy denies unencrypted PUTs, or that require bucket-owner-full-control,
// refuse anything else.
type objectSettings struct {
	sse      types.ServerSideEncryption // "" when not set
	kmsKeyID string
	// SSE-C: the key and its MD5, base64, sent with every PUT, GET and HEAD.
	ssecKey, ssecMD5 string
	acl              types.ObjectCannedACL
}

// WithServerSideEncryption makes every object the client writes — epoch
// objects, the line's tickets, storecheck's probes, and fence.Put targets
// whose input sets no encryption of its own — encrypted at rest: SSE-S3
// (AES256) when kmsKeyID is "", SSE-KMS with that key (an ID, ARN or alias)
// otherwise. It conflicts with WithSSECustomerKey.
func WithServerSideEncryption(kmsKeyID string) Option {
	return clientOption("WithServerSideEncryption", func(c *config) error {
		if c.objects.ssecKey != "" {
			return invalid("server-side encryption (SSE-S3 or SSE-KMS) and a customer-provided key (SSE-C) exclude each other: choose one")
		}
		if kmsKeyID == "" {
			c.objects.sse = types.ServerSideEncryptionAes256
		} else {
			c.objects.sse, c.objects.kmsKeyID = types.ServerSideEncryptionAwsKms, kmsKeyID
		}
		return nil
	})
}

// WithSSECustomerKey encrypts every object the client writes with the
// customer-provided 256-bit key (SSE-C) and sends the key with every read,
// which SSE-C requires. The key is never logged or put in an error message.
// It conflicts with WithServerSideEncryption.
func WithSSECustomerKey(key []byte) Option {
	return clientOption("WithSSECustomerKey", func(c *config) error {
		switch {
		case len(key) != 32:
			return invalid("WithSSECustomerKey needs a 256-bit key (32 bytes), not %d bytes", len(key))
		case c.objects.sse != "":
			return invalid("server-side encryption (SSE-S3 or SSE-KMS) and a customer-provided key (SSE-C) exclude each other: choose one")
		}
		sum := md5.Sum(key)
		c.objects.ssecKey = base64.StdEncoding.EncodeToString(key)
		c.objects.ssecMD5 = base64.StdEncoding.EncodeToString(sum[:])
		return nil
	})
}

// WithACL sets a canned ACL (e.g. "bucket-owner-full-control") on every
// object the client writes.
func WithACL(acl string) Option {
	return clientOption("WithACL", func(c *config) error {
		known := types.ObjectCannedACL("").Values()
		if !slices.Contains(known, types.ObjectCannedACL(acl)) {
			names := make([]string, len(known))
			for i, k := range known {
				names[i] = string(k)
			}
			return invalid("unknown canned ACL %q: use one of %s", acl, strings.Join(names, ", "))
		}
		c.objects.acl = types.ObjectCannedACL(acl)
		return nil
	})
}

// onPut applies the settings to a write of the client's own objects.
func (o objectSettings) onPut(in *s3.PutObjectInput) {
	in.ServerSideEncryption = o.sse
	if o.kmsKeyID != "" {
		in.SSEKMSKeyId = aws.String(o.kmsKeyID)
	}
	if o.ssecKey != "" {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(o.ssecKey), aws.String(o.ssecMD5)
	}
	in.ACL = o.acl
}

// onFencedPut applies the settings to a fence.Put input that sets no
// encryption (or ACL) of its own; in is a copy the caller may change.
func (o objectSettings) onFencedPut(in *s3.PutObjectInput) {
	if in.ServerSideEncryption == "" && in.SSECustomerKey == nil {
		in.ServerSideEncryption = o.sse
		if o.kmsKeyID != "" {
			in.SSEKMSKeyId = aws.String(o.kmsKeyID)
		}
		if o.ssecKey != "" {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(o.ssecKey), aws.String(o.ssecMD5)
		}
	}
	if in.ACL == "" {
		in.ACL = o.acl
	}
}

// onGet applies SSE-C, which reads need too.
func (o objectSettings) onGet(in *s3.GetObjectInput) {
	if o.ssecKey != "" {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(o.ssecKey), aws.String(o.ssecMD5)
	}
}

// onHead applies SSE-C to a HEAD.
func (o objectSettings) onHead(in *s3.HeadObjectInput) {
	if o.ssecKey != "" {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(o.ssecKey), aws.String(o.ssecMD5)
	}
}
