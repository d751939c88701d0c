package s3lock

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Verify probes whether the store really enforces the conditional writes
// the protocol depends on, with a throwaway object under the probe prefix
// (WithProbePrefix): a second create with If-None-Match: * must be refused,
// If-Match with a wrong ETag must be refused, If-Match with the right ETag
// must succeed, and different bodies must get different ETags. It returns an
// error matching ErrConditionalWritesUnsupported if the store accepted a
// write it should have refused, and other errors (ErrAccessDenied, ...) if
// it could not run the probe. The probe object is deleted afterwards; that
// needs s3:DeleteObject, which s3lock also needs to delete old epochs, so a
// failure to delete it is reported too. ctx bounds the probe (five requests);
// the probe object is deleted even if ctx has ended.
func (c *Client) Verify(ctx context.Context) (err error) {
	key := c.cfg.probePrefix + "probe-" + randomHex(8) + ".json"
	created := false
	defer func() {
		if !created {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.requestTimeout)
		defer cancel()
		_, derr := c.api.DeleteObject(dctx, &s3.DeleteObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), ExpectedBucketOwner: c.owner()})
		if derr != nil && err == nil {
			err = c.opError("DeleteObject", key, derr)
		}
	}()
	unsupported := func(what string) error {
		return fmt.Errorf("%w: s3://%s/%s: %s; s3lock cannot provide mutual exclusion on this store",
			ErrConditionalWritesUnsupported, c.bucket, key, what)
	}
	body := func(step string) []byte {
		return []byte(`{"s3lockProbe":"` + step + `","nonce":"` + randomHex(8) + `"}`)
	}

	etag1, err := c.putEpoch(ctx, key, "", body("create"))
	created = err == nil
	if err != nil {
		if classify(err) == failUnsupported {
			return unsupported("it rejected If-None-Match: * as not implemented")
		}
		return err
	}
	refused := func(err error, what string) error {
		switch {
		case err == nil:
			return unsupported(what + " succeeded")
		case classify(err) == failPrecondition, classify(err) == failConflict:
			return nil
		}
		return err
	}
	_, err = c.putEpoch(ctx, key, "", body("second-create"))
	if err := refused(err, "a second create with If-None-Match: *"); err != nil {
		return err
	}
	_, err = c.putEpoch(ctx, key, `"00000000000000000000000000000000"`, body("wrong-etag"))
	if err := refused(err, "a write with If-Match on a wrong ETag"); err != nil {
		return err
	}
	etag2, err := c.putEpoch(ctx, key, etag1, body("swap"))
	if err != nil {
		if classify(err) == failPrecondition {
			return unsupported("a write with If-Match on the object's own ETag was refused")
		}
		return err
	}
	if etag2 == etag1 || etag2 == "" {
		return unsupported(fmt.Sprintf("two different bodies got the same ETag %s", etag1))
	}
	return nil
}
