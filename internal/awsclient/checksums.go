package awsclient

import (
	"fmt"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// skip_s3_checksum.
//
// With SkipS3Checksum the S3 client computes request checksums only where
// S3 requires one (aws.RequestChecksumCalculationWhenRequired). Of the
// requests s3lock makes, that is DeleteObjects (the cleanup of old epochs),
// for which the SDK still sends x-amz-checksum-crc32, the flexible checksum
// header that the stores needing skip_s3_checksum reject. S3 also accepts
// Content-MD5 there, the checksum the AWS SDKs sent before 2025 and that
// S3-compatible stores implement; the SDK has no setting for it, so
// contentMD5Instead puts it back with the SDK's own middleware API: it drops
// the flexible checksum's setup and adds smithy-go's Content-MD5 middleware.

// checksumRequired are the S3 operations s3lock calls whose checksum S3
// requires.
var checksumRequired = map[string]bool{"DeleteObjects": true}

// sdkChecksumSetup is the ID of the S3 client's middleware that picks the
// flexible checksum algorithm of a request (service/internal/checksum's
// SetupInputContext). Without it, no x-amz-checksum-* header is computed.
const sdkChecksumSetup = "AWSChecksum:SetupInputContext"

// contentMD5Instead is an S3 API option: the operations of checksumRequired
// send Content-MD5 instead of a flexible checksum. It fails the request
// rather than send the flexible checksum when the SDK's middleware is not
// where it was (a change of the SDK, which the tests would show).
func contentMD5Instead(stack *middleware.Stack) error {
	if !checksumRequired[stack.ID()] {
		return nil
	}
	if _, err := stack.Initialize.Remove(sdkChecksumSetup); err != nil {
		return fmt.Errorf("awsclient: skip_s3_checksum cannot replace the checksum of %s with Content-MD5 "+
			"(the AWS SDK's checksum middleware changed: %w); this is a bug, please report it", stack.ID(), err)
	}
	return smithyhttp.AddContentChecksumMiddleware(stack)
}
