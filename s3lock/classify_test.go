package s3lock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func apiErr(status int, code string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: "m"},
	}}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want failure
	}{
		{"412", apiErr(412, "PreconditionFailed"), failPrecondition},
		{"304", apiErr(304, "NotModified"), failNotModified},
		{"404 key", apiErr(404, "NoSuchKey"), failNotFound},
		{"404 bucket", apiErr(404, "NoSuchBucket"), failNoSuchBucket},
		{"409", apiErr(409, "ConditionalRequestConflict"), failConflict},
		{"403", apiErr(403, "AccessDenied"), failAccessDenied},
		{"bad signature", apiErr(403, "SignatureDoesNotMatch"), failAccessDenied},
		{"500", apiErr(500, "InternalError"), failTransient},
		{"503 slow down", apiErr(503, "SlowDown"), failTransient},
		{"429", apiErr(429, "TooManyRequests"), failTransient},
		{"400 other", apiErr(400, "InvalidArgument"), failOther},
		{"501", apiErr(501, "NotImplemented"), failUnsupported},
		{"retry quota", errors.Join(apiErr(503, "SlowDown"), fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{Available: 0, Requested: 5})), failTransient},
		{"max attempts", &retry.MaxAttemptsError{Attempt: 3, Err: io.ErrUnexpectedEOF}, failTransient},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), failTransient},
		{"unexpected EOF", io.ErrUnexpectedEOF, failTransient},
		{"caller cancelled", context.Canceled, failCanceled},
		{"request timeout", &requestTimeout{err: context.DeadlineExceeded}, failTransient},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), failCanceled},
	}
	for _, tc := range cases {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: classify = %d; want %d", tc.name, got, tc.want)
		}
	}
}

// TestClassify_ARefusedSessionIsTheStoresAnswer: on a directory bucket the
// SDK asks for a session before each client's first request and reports its
// failure as text inside a credentials error; s3lock classifies it by the
// store's answer (a 503 is an outage, a 403 a refusal, a 404 a missing
// bucket), not as missing credentials — which a failure without an answer
// still is.
func TestClassify_ARefusedSessionIsTheStoresAnswer(t *testing.T) {
	session := func(answer string) error {
		return fmt.Errorf("operation error S3: PutObject, get identity: get credentials: operation error S3: CreateSession, %s", answer)
	}
	for _, tc := range []struct {
		err  error
		want failure
	}{
		{session("exceeded maximum number of attempts, 3, https response error StatusCode: 503, RequestID: x, HostID: y, api error ServiceUnavailable: down"), failTransient},
		{session("https response error StatusCode: 403, RequestID: , HostID: , api error SignatureDoesNotMatch: no"), failAccessDenied},
		{session("https response error StatusCode: 404, RequestID: , HostID: , NoSuchBucket: The specified bucket does not exist"), failNoSuchBucket},
		{session("https response error StatusCode: 403, RequestID: , HostID: , api error InvalidAccessKeyId: unknown"), failAccessDenied},
		{session("exceeded maximum number of attempts, 3, https response error StatusCode: 0, RequestID: , HostID: , request send failed, dial tcp 127.0.0.1:1: connect: connection refused"), failTransient},
		{session("retry quota exceeded, 0 available, 5 requested"), failTransient},
		{fmt.Errorf("operation error S3: PutObject, get identity: get credentials: s3express retrieve credentials canceled"), failCanceled},
		{session("get identity: get credentials: failed to refresh cached credentials, no EC2 IMDS role found"), failCredentials},
		{fmt.Errorf("operation error S3: PutObject, get identity: get credentials: failed to refresh cached credentials, no EC2 IMDS role found"), failCredentials},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%q) = %v; want %v", tc.err, got, tc.want)
		}
		if got := classify(&opError{Op: "PutObject", Err: tc.err}); got != tc.want {
			t.Errorf("classify of an *opError around %q = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// TestOpError_ADirectoryBucketOutOfReachSaysSo: a directory bucket's zonal
// endpoint that cannot be reached (a wrong region or zone in the bucket's
// name, no network) is reported as unreachable, with the SDK's dial error.
func TestOpError_ADirectoryBucketOutOfReachSaysSo(t *testing.T) {
	err := &opError{Op: "ListObjectsV2", Bucket: "locks--use1-az4--x-s3", Key: "a/", Kind: ErrUnavailable,
		Err: fmt.Errorf("operation error S3: ListObjectsV2, get identity: get credentials: operation error S3: CreateSession, " +
			"https response error StatusCode: 0, RequestID: , HostID: , request send failed, Get \"https://locks--use1-az4--x-s3." +
			"s3express-use1-az4.us-east-1.amazonaws.com/?session=\": dial tcp: lookup locks--use1-az4--x-s3.s3express-use1-az4." +
			"us-east-1.amazonaws.com: no such host")}
	msg := err.Error()
	for _, want := range []string{"CreateSession: no answer", "no such host", "the store is unreachable: check the endpoint, the region"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	if classify(err) != failTransient {
		t.Errorf("classify = %v; want transient", classify(err))
	}
}

// TestOpError_StoreTextIsShownEscaped: the store's error code and message are
// the store's text; an endpoint that answers a message with a line break and
// escape sequences gets them escaped in the error, which the CLI prints and
// Terraform shows (PROTOCOL.md §3, "Text read from the bucket").
func TestOpError_StoreTextIsShownEscaped(t *testing.T) {
	err := &opError{Op: "PutObject", Bucket: "b", Key: "k", Err: &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject",
		Err: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}},
			Err:      &smithy.GenericAPIError{Code: "Bad\x1b[31m", Message: "no\n::error::forged\x1b]0;title\a"},
		}}}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r\x1b\a") || !strings.Contains(msg, `no\n::error::forged\x1b]0;title\a`) ||
		!strings.Contains(msg, `Bad\x1b[31m`) {
		t.Errorf("Error() = %q; want the store's code and message escaped", msg)
	}
}
