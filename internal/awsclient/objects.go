package awsclient

import (
	"crypto/md5"
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// validationBucket is a well-formed bucket name for checking options with
// s3lock.ValidateConfig before any bucket is known.
const validationBucket = "s3lock-validation"

// ObjectSettings say how s3lock writes its objects, with the meanings of
// Terraform's S3 backend settings of the same names (encrypt, kms_key_id,
// sse_customer_key, acl). The zero value writes plain objects.
//
// SSECustomerKey is secret: it never appears in an error of this package.
type ObjectSettings struct {
	// Encrypt turns on server-side encryption: SSE-S3 (AES256), or SSE-KMS
	// when KMSKeyID is set.
	Encrypt bool `json:"encrypt,omitempty"`
	// KMSKeyID is the KMS key (ID, ARN or alias) of SSE-KMS; it needs
	// Encrypt.
	KMSKeyID string `json:"kms_key_id,omitempty"`
	// SSECustomerKey is the base64 of a 256-bit key for SSE-C, which is then
	// sent with every read too. It excludes Encrypt.
	SSECustomerKey string `json:"sse_customer_key,omitempty"`
	// ACL is a canned ACL put on every object written, e.g.
	// "bucket-owner-full-control".
	ACL string `json:"acl,omitempty"`
}

// Options translates the settings into s3lock options and validates them
// with the SDK's own rules. The errors wrap ErrInvalidOptions, or
// s3lock.ErrInvalidConfig for what the SDK refuses (a key of the wrong
// length, SSE-C together with server-side encryption, an unknown ACL).
func (s ObjectSettings) Options() ([]s3lock.Option, error) {
	var opts []s3lock.Option
	if s.KMSKeyID != "" && !s.Encrypt {
		return nil, fmt.Errorf("%w: a KMS key ID is set but encryption is not turned on: turn it on for SSE-KMS, "+
			"or drop the key ID (the key ID only applies with encryption)", ErrInvalidOptions)
	}
	if s.Encrypt {
		opts = append(opts, s3lock.WithServerSideEncryption(s.KMSKeyID))
	}
	if s.SSECustomerKey != "" {
		key, err := base64.StdEncoding.DecodeString(s.SSECustomerKey)
		if err != nil {
			// The decoding error names only a byte offset, never the key.
			return nil, fmt.Errorf("%w: the SSE-C customer key is not valid base64 (%v): give the base64 "+
				"of 32 random bytes, e.g. from `openssl rand -base64 32`", ErrInvalidOptions, err)
		}
		opts = append(opts, s3lock.WithSSECustomerKey(key))
	}
	if s.ACL != "" {
		opts = append(opts, s3lock.WithACL(s.ACL))
	}
	if err := s3lock.ValidateConfig(validationBucket, opts...); err != nil {
		return nil, err
	}
	return opts, nil
}

// OnPut sets the encryption and ACL of a PutObject the provider makes
// itself rather than through the s3lock SDK (which applies the same
// settings, from Options, to its own requests).
func (s ObjectSettings) OnPut(in *s3.PutObjectInput) {
	switch {
	case s.SSECustomerKey != "":
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = s.ssec()
	case s.Encrypt && s.KMSKeyID != "":
		in.ServerSideEncryption, in.SSEKMSKeyId = types.ServerSideEncryptionAwsKms, aws.String(s.KMSKeyID)
	case s.Encrypt:
		in.ServerSideEncryption = types.ServerSideEncryptionAes256
	}
	if s.ACL != "" {
		in.ACL = types.ObjectCannedACL(s.ACL)
	}
}

// OnGet sets the SSE-C key of a GetObject the provider makes itself.
func (s ObjectSettings) OnGet(in *s3.GetObjectInput) {
	if s.SSECustomerKey != "" {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = s.ssec()
	}
}

// ssec is the SSE-C headers: the algorithm, the key and its MD5 (base64).
// The key was checked by Options.
func (s ObjectSettings) ssec() (alg, key, sum *string) {
	raw, _ := base64.StdEncoding.DecodeString(s.SSECustomerKey)
	h := md5.Sum(raw) // the digest S3 asks for with an SSE-C key
	return aws.String("AES256"), aws.String(s.SSECustomerKey), aws.String(base64.StdEncoding.EncodeToString(h[:]))
}
