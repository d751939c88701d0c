package s3lock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3lock/terraform-provider-s3lock/internal/textsafe"
)

// This file is the one home of error classification: what an S3 error
// means for the protocol (failure), which sentinel it matches (kindOf), and
// how it reads in a message (describeCause).

// failure classifies an S3 error for the protocol.
type failure int

const (
	failOther        failure = iota
	failPrecondition         // 412: a conditional header did not hold
	failNotFound             // 404 NoSuchKey
	failNotModified          // 304: unchanged since the ETag we hold
	failConflict             // 409: a conflicting conditional request is in progress
	failTransient            // 5xx, throttling, timeouts, connection errors, retry quota
	failAccessDenied         // 403
	failNoSuchBucket         // 404 NoSuchBucket
	failCanceled             // the caller's context ended
	failUnsupported          // 501: the store does not implement the request (e.g. conditional writes)
	failCredentials          // the SDK could not sign the request: no usable credentials
	failCollision            // the key cannot exist: an object sits at a parent path (or a "directory" at the key)
)

// collisionCodes are the error codes with which stores refuse a key whose
// parent path is an object, or that is itself a "directory" of other keys:
// versitygw's posix backend (409), MinIO (400 / 409).
var collisionCodes = map[string]bool{
	"ObjectParentIsFile":            true,
	"ExistingObjectIsDirectory":     true,
	"XMinioParentIsObject":          true,
	"XMinioObjectExistsAsDirectory": true,
}

// unknownKeyCodes are the error codes with which stores say they do not know
// the request's access key — whatever status they send it with (AWS, MinIO
// and SeaweedFS: 403 InvalidAccessKeyId; versitygw: 404
// XAdminUserNotFound). It is a credentials problem on every store.
var unknownKeyCodes = map[string]bool{
	"InvalidAccessKeyId": true,
	"XAdminUserNotFound": true,
}

// unknownAccessKey reports whether the store refused err's request because
// it does not know its access key.
func unknownAccessKey(err error) bool {
	code, _ := answerCode(err)
	return unknownKeyCodes[code]
}

// badSignature reports whether the store refused err's request because its
// signature did not match: the secret key is not the access key's (or
// something between rewrote the request).
func badSignature(err error) bool {
	code, _ := answerCode(err)
	return code == "SignatureDoesNotMatch"
}

// badSessionToken reports whether the store refused err's request because
// its session token has expired or is not valid.
func badSessionToken(err error) bool {
	code, _ := answerCode(err)
	return code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired"
}

func classify(err error) failure {
	if err == nil {
		return failOther
	}
	var timeout *requestTimeout
	if errors.As(err, &timeout) {
		return failTransient
	}
	code, status := answerCode(err)
	if credentialsFailure(err) {
		_, _, asked := sessionAnswer(err)
		switch {
		case strings.Contains(sdkError(err).Error(), "retrieve credentials canceled"):
			return failCanceled // waiting for another request's CreateSession, the caller's context ended
		case asked && status == 0:
			return failTransient // the CreateSession got no answer: the store is unreachable
		case !asked:
			// The request was never sent: a status in err is the
			// credential provider's (an instance metadata service that
			// answered 403 made this an S3 permission error).
			return failCredentials
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return failCanceled // the caller's context ended
	}
	if f, ok := classifyAnswer(code, status); ok {
		return f
	}
	return classifyNoAnswer(err, code, status)
}

// classifyAnswer classifies the store's answer by its error code and HTTP
// status; ok is false when they say nothing the protocol tells apart.
func classifyAnswer(code string, status int) (f failure, ok bool) {
	switch {
	case collisionCodes[code]:
		return failCollision, true
	case unknownKeyCodes[code]:
		return failAccessDenied, true
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
		return failPrecondition, true
	case status == http.StatusNotImplemented || code == "NotImplemented":
		return failUnsupported, true
	case status == http.StatusNotModified || code == "NotModified":
		return failNotModified, true
	case code == "NoSuchBucket":
		return failNoSuchBucket, true
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return failNotFound, true
	case code == "ConditionalRequestConflict" || code == "OperationAborted" || status == http.StatusConflict:
		return failConflict, true
	case status == http.StatusForbidden || code == "AccessDenied" || code == "InvalidAccessKeyId" ||
		code == "SignatureDoesNotMatch" || code == "ExpiredToken" || code == "InvalidToken":
		return failAccessDenied, true
	case status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout:
		return failTransient, true
	case code == "SlowDown" || code == "RequestTimeout" || code == "Throttling" || code == "RequestTimeTooSkewed":
		return failTransient, true
	}
	return failOther, false
}

// classifyNoAnswer classifies err whose code and status (if any) say
// nothing the protocol tells apart: a failure of the transport, or none.
func classifyNoAnswer(err error, code string, status int) failure {
	var quota ratelimit.QuotaExceededError
	var maxAttempts *retry.MaxAttemptsError
	var netErr net.Error
	switch {
	case errors.As(err, &quota), errors.As(err, &maxAttempts):
		return failTransient
	case errors.As(err, &netErr):
		return failTransient
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return failTransient
	case strings.Contains(err.Error(), "connection reset"), strings.Contains(err.Error(), "broken pipe"),
		strings.Contains(err.Error(), "retry quota exceeded"):
		return failTransient
	}
	if status == 0 && code == "" {
		// No answer from the store at all (the request never completed):
		// treat as transient; writes are resolved by reading back.
		return failTransient
	}
	return failOther
}

// sessionAnswerText is how the SDK reports a directory bucket's refused
// CreateSession: as text ("get credentials: %v"), not as a wrapped error.
var sessionAnswerText = regexp.MustCompile(`StatusCode: (\d+)(?:, RequestID: [^,]*, HostID: [^,]*, (?:api error )?([A-Za-z]+):)?`)

// sessionAnswer returns the status and code of the store's answer to the
// CreateSession request the SDK makes before a directory bucket's requests,
// when that request failed: the answer is the store's (a 503, a refused
// signature), not a lack of credentials. ok with status 0: the request got
// no answer (the store is unreachable).
func sessionAnswer(err error) (code string, status int, ok bool) {
	if !credentialsFailure(err) {
		return "", 0, false
	}
	text := sdkError(err).Error()
	i := strings.Index(text, "CreateSession, ")
	if i < 0 || strings.Contains(text[i:], "get identity: ") {
		return "", 0, false // no session asked for, or it lacked credentials itself
	}
	if m := sessionAnswerText.FindStringSubmatch(text[i:]); m != nil {
		status, _ = strconv.Atoi(m[1])
		return m[2], status, true
	}
	return "", 0, true // no answer (the SDK's retry quota ran out, say)
}

// credentialsFailure reports whether the SDK failed to obtain credentials for
// a request (so it was never sent). The SDK has no type for this; it wraps
// the credential provider's error as "get identity: ..." or, in older code
// paths, in a *v4.SigningError.
func credentialsFailure(err error) bool {
	var signing *v4.SigningError
	return errors.As(err, &signing) || strings.Contains(sdkError(err).Error(), "get identity: ")
}

// sdkError is the SDK's error inside an *opError, whose own message
// describes it in other words.
func sdkError(err error) error {
	var op *opError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// refused reports whether a failed write certainly did not happen, and will
// not happen if retried as is: the store or the SDK refused it outright.
func (f failure) refused() bool {
	switch f {
	case failAccessDenied, failCredentials, failNoSuchBucket, failUnsupported, failCollision, failOther:
		return true
	}
	return false
}

// errorCode returns the S3 error code and HTTP status of err, if it has them.
// answerCode is errorCode, or the code and status of the store's answer to
// the CreateSession that failed before the request (sessionAnswer).
func answerCode(err error) (code string, status int) {
	if code, status, ok := sessionAnswer(err); ok {
		return code, status
	}
	return errorCode(err)
}

func errorCode(err error) (code string, status int) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	return code, status
}

func kindOf(f failure) error {
	switch f {
	case failTransient, failConflict:
		return ErrUnavailable
	case failAccessDenied, failCredentials:
		return ErrAccessDenied
	case failNoSuchBucket:
		return ErrNoSuchBucket
	case failUnsupported:
		return ErrConditionalWritesUnsupported
	case failCollision:
		return ErrNameCollision
	}
	return nil
}

// describeCause turns an SDK error into a short sentence: the API error code
// and message when the store answered, the network error or timeout when it
// did not, the credential provider's complaint when there were no
// credentials; then what the SDK's retryer gave up on.
func describeCause(err error) string {
	var (
		apiErr  smithy.APIError
		timeout *requestTimeout
		netErr  *net.OpError
		msg     string
	)
	switch {
	case errors.As(err, &apiErr):
		msg = apiErr.ErrorCode()
		if m := apiErr.ErrorMessage(); m != "" {
			msg += ": " + m
		}
		var respErr *smithyhttp.ResponseError
		if errors.As(err, &respErr) {
			msg = http.StatusText(respErr.HTTPStatusCode()) + " (" + msg + ")"
		}
	case errors.As(err, &timeout):
		msg = fmt.Sprintf("no answer within %s", timeout.after)
	case errors.As(err, &netErr):
		msg = netErr.Error()
	case sessionFailed(err, &msg):
	case errors.Is(err, context.DeadlineExceeded):
		msg = "the time the caller allowed ran out before the store answered"
	case errors.Is(err, context.Canceled):
		msg = "the caller stopped (cancelled) before the store answered"
	case credentialsFailure(err):
		msg = err.Error()
		if i := strings.LastIndex(msg, "get credentials: "); i >= 0 {
			msg = msg[i+len("get credentials: "):]
		}
		msg = "no credentials: " + msg
	default:
		msg = err.Error()
	}
	// The store's code and message are the store's text: escaped (no line
	// breaks, no terminal escapes) like a holder read from the bucket.
	msg = textsafe.Escape(msg, maxCauseText)
	var quota ratelimit.QuotaExceededError
	if errors.As(err, &quota) || strings.Contains(sdkError(err).Error(), "retry quota exceeded") {
		msg += "; the SDK's retry quota exceeded, so it stopped retrying"
	}
	var attempts *retry.MaxAttemptsError
	if errors.As(err, &attempts) {
		msg += fmt.Sprintf(" (after %d attempts)", attempts.Attempt)
	}
	return msg
}

// maxCauseText bounds the store's part of an error message: S3's messages
// are a sentence.
const maxCauseText = 1 << 10

// sessionFailed sets msg to the store's answer to a failed CreateSession
// (sessionAnswer), if err is one.
func sessionFailed(err error, msg *string) bool {
	code, status, ok := sessionAnswer(err)
	switch {
	case !ok:
	case status == 0:
		*msg = "CreateSession: no answer from the store"
		if i := strings.Index(sdkError(err).Error(), "dial tcp"); i >= 0 {
			*msg += " (" + sdkError(err).Error()[i:] + ")"
		}
	default:
		*msg = "CreateSession: " + http.StatusText(status)
		if code != "" {
			*msg += " (" + code + ")"
		}
	}
	return ok
}

// causeText is err's message without the "s3lock: " that starts the
// package's own errors, for nesting one in another's message.
func causeText(err error) string {
	return strings.TrimPrefix(err.Error(), "s3lock: ")
}

// requestTimeout marks an error caused by the per-request timeout
// (WithRequestTimeout) rather than by the caller's context: the store did not
// answer in time, which may pass.
type requestTimeout struct {
	after time.Duration
	err   error
}

func (e *requestTimeout) Error() string {
	return fmt.Sprintf("no answer within %s (%v)", e.after, e.err)
}

func (e *requestTimeout) Unwrap() error { return e.err }
