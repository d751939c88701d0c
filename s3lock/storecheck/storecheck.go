// Package storecheck checks a bucket before anyone relies on it for
// locks: does the store enforce the conditional writes the protocol depends
// on, does it list keys as s3lock reads them, and may the credentials list,
// get, put and delete under the locks' prefix? Verify answers with an
// error; Run with a Report of each check, as `s3lock verify` and the
// provider's s3lock_verify action print it.
//
// The checks write throwaway probe objects under PREFIX + "s3lock-probe/",
// a path segment no lock name may contain, where PREFIX is the lock name
// prefix the locks live under ("" for the whole bucket; "locks/" for
// credentials limited to locks/*), and delete them again.
package storecheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/internal/bridge"
)

// Verify probes whether the store really enforces the conditional writes
// the protocol depends on, with a throwaway object under the probe prefix
// (prefix + "s3lock-probe/", prefix being the lock name prefix the locks
// live under, "" for the whole bucket): a second create with If-None-Match:
// * must be refused, If-Match with a wrong ETag must be refused, If-Match
// with the right ETag must succeed, and different bodies must get different
// ETags; then keys must be listed in pages that are ranges of the ascending
// key order, honouring StartAfter. It returns an error matching
// s3lock.ErrConditionalWritesUnsupported if the store accepted a write it
// should have refused, s3lock.ErrUnorderedListing if it lists out of order,
// s3lock.ErrInvalidConfig if prefix is not a lock name prefix ending in '/',
// and other errors (s3lock.ErrAccessDenied, ...) if it could not run the
// probe. The probe objects are deleted afterwards; that needs
// s3:DeleteObject, which s3lock also needs to delete old epochs, so a
// failure to delete them is reported too. ctx bounds the probe (twelve
// requests, each bounded by the client's request timeout); the probe
// objects are deleted even if ctx has ended.
func Verify(ctx context.Context, client *s3lock.Client, prefix string) error {
	p, err := newProbe(client, prefix)
	if err != nil {
		return err
	}
	return p.verify(ctx)
}

func (p probe) verify(ctx context.Context) error {
	if err := p.conditional(ctx); err != nil {
		return err
	}
	return p.listingOrder(ctx)
}

// probe is one run of the probes: the client's request layer, and the
// prefix the probes go under (ending in "s3lock-probe/").
type probe struct {
	c      bridge.Client
	prefix string
}

// probeSegment is the path segment under which the probes go. No lock name
// may contain it (s3lock.ValidateName), so a probe never collides with a
// lock and List never shows one.
const probeSegment = bridge.ProbeSegment

// newProbe checks prefix, the lock name prefix the locks live under.
func newProbe(client *s3lock.Client, prefix string) (probe, error) {
	switch {
	case client == nil:
		return probe{}, invalid("storecheck needs a client")
	case strings.HasSuffix(prefix, probeSegment+"/"):
		return probe{}, invalid("probe prefix %q: give the prefix the locks live under; "+
			"the probes go under it + %q, which storecheck adds itself", prefix, probeSegment+"/")
	case prefix != "" && !strings.HasSuffix(prefix, "/"):
		return probe{}, invalid("probe prefix %q must be empty or a lock name prefix ending in '/'", prefix)
	}
	if err := s3lock.ValidatePrefix(prefix); err != nil {
		return probe{}, invalid("probe prefix %q: %v", prefix, err)
	}
	return probe{c: bridge.Of(client), prefix: prefix + probeSegment + "/"}, nil
}

// invalid is an error matching s3lock.ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", s3lock.ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// conditional is Verify's conditional-write probe (five requests).
func (p probe) conditional(ctx context.Context) (err error) {
	key := p.prefix + "probe-" + bridge.RandomHex(8) + ".json"
	created := false
	defer func() {
		if !created {
			return
		}
		dctx, cancel := p.c.Detached(ctx)
		defer cancel()
		if derr := p.c.DeleteKey(dctx, key); derr != nil && err == nil {
			err = cleanupError{derr}
		}
	}()
	unsupported := func(what string) error {
		return fmt.Errorf("%w: s3://%s/%s: %s; s3lock cannot provide mutual exclusion on this store",
			s3lock.ErrConditionalWritesUnsupported, p.c.Bucket(), key, what)
	}
	body := func(step string) []byte {
		return []byte(`{"s3lockProbe":"` + step + `","nonce":"` + bridge.RandomHex(8) + `"}`)
	}

	etag1, err := p.c.PutEpoch(ctx, key, "", body("create"))
	created = err == nil
	if err != nil {
		if bridge.ClassOf(err) == bridge.Unsupported {
			return unsupported("it rejected If-None-Match: * as not implemented")
		}
		return err
	}
	refused := func(err error, what string) error {
		switch {
		case err == nil:
			return unsupported(what + " succeeded")
		case bridge.ClassOf(err) == bridge.Precondition, bridge.ClassOf(err) == bridge.Conflict:
			return nil
		}
		return err
	}
	_, err = p.c.PutEpoch(ctx, key, "", body("second-create"))
	if err := refused(err, "a second create with If-None-Match: *"); err != nil {
		return err
	}
	_, err = p.c.PutEpoch(ctx, key, `"00000000000000000000000000000000"`, body("wrong-etag"))
	if err := refused(err, "a write with If-Match on a wrong ETag"); err != nil {
		return err
	}
	etag2, err := p.c.PutEpoch(ctx, key, etag1, body("swap"))
	if err != nil {
		if bridge.ClassOf(err) == bridge.Precondition {
			return unsupported("a write with If-Match on the object's own ETag was refused")
		}
		return err
	}
	if etag2 == etag1 || etag2 == "" {
		return unsupported(fmt.Sprintf("two different bodies got the same ETag %s", etag1))
	}
	return nil
}

// listingOrder probes whether the store lists keys as finding a
// lock's newest epoch needs (PROTOCOL.md §8): pages that are ranges of the
// ascending key order (their order within a page does not matter: s3lock
// sorts each page), and StartAfter honoured. It writes three keys out of
// order, lists them two per page and again after the first, and deletes
// them: seven requests, the deletion even after ctx ended. A store that
// lists otherwise (S3 directory buckets list in no set order and do not
// support StartAfter) fails with s3lock.ErrUnorderedListing.
func (p probe) listingOrder(ctx context.Context) (err error) {
	dir := p.prefix + "order-" + bridge.RandomHex(8) + "/"
	keys := []string{dir + "1", dir + "2", dir + "3"}
	var written []string
	defer func() {
		dctx, cancel := p.c.Detached(ctx)
		defer cancel()
		if derr := p.c.DeleteKeys(dctx, written); derr != nil && err == nil {
			err = cleanupError{derr}
		}
	}()
	body := []byte(`{"s3lockProbe":"order"}`)
	for _, i := range []int{2, 0, 1} { // not in key order
		written = append(written, keys[i]) // before the PUT: one whose answer was lost may have landed
		if _, err := p.c.PutEpoch(ctx, keys[i], "", body); err != nil {
			return err
		}
	}
	sizes := map[string]int64{}
	pages, err := p.listPages(ctx, dir, 2, "", sizes)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if n, ok := sizes[k]; ok && n != int64(len(body)) {
			return fmt.Errorf("%w: s3://%s/%s: the listing gives a size of %d bytes to an object of %d; slot locks read "+
				"what their epochs' sizes say (PROTOCOL.md §14), so s3lock could take a held slot on this store",
				s3lock.ErrUnorderedListing, p.c.Bucket(), k, n, len(body))
		}
	}
	if p.c.Directory() {
		return p.checkWholeListing(dir, keys, pages)
	}
	unordered := func(what string) error {
		return fmt.Errorf("%w: s3://%s/%s: %s; s3lock finds a lock's holder in an ordered listing, so it could miss "+
			"the holder on this store: use a general purpose S3 bucket, or a store that passes s3lock verify",
			s3lock.ErrUnorderedListing, p.c.Bucket(), dir, what)
	}
	want := [][]string{keys[:2], keys[2:]}
	if len(pages) != len(want) || !sameKeys(pages[0], want[0]) || !sameKeys(pages[1], want[1]) {
		return unordered(fmt.Sprintf("keys 1, 2, 3 listed two per page came as %s, not [1 2] then [3]", short(pages, dir)))
	}
	after, err := p.listPages(ctx, dir, 0, keys[0], nil)
	if badRequest(err) {
		return unordered("it refused a listing with StartAfter (" + bridge.Describe(err) + ")")
	}
	if err != nil {
		return err
	}
	if len(after) != 1 || !sameKeys(after[0], keys[1:]) {
		return unordered(fmt.Sprintf("listed after 1 (StartAfter), they came as %s, not [2 3]", short(after, dir)))
	}
	return nil
}

// checkWholeListing is the listing probe's verdict on a directory bucket,
// which lists in no set order and without StartAfter, and which s3lock
// therefore lists whole: what it needs is that paging
// with continuation tokens shows every key once.
func (p probe) checkWholeListing(dir string, keys []string, pages [][]string) error {
	seen := slices.Concat(pages...)
	if !sameKeys(seen, keys) {
		return fmt.Errorf("%w: s3://%s/%s: keys 1, 2, 3 listed two per page came as %s, not each once; "+
			"s3lock lists a directory bucket's lock whole and could miss its holder on this store",
			s3lock.ErrUnorderedListing, p.c.Bucket(), dir, short(pages, dir))
	}
	return nil
}

// listPages lists prefix, maxKeys per page (0: the store's default),
// after startAfter (if set), and returns the keys of each page. It stops
// after probePages pages: a store that pages on without end is not one
// s3lock can use either.
func (p probe) listPages(ctx context.Context, prefix string, maxKeys int32, startAfter string, sizes map[string]int64) ([][]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(p.c.Bucket()), Prefix: aws.String(prefix), ExpectedBucketOwner: p.c.Owner()}
	if maxKeys > 0 {
		in.MaxKeys = aws.Int32(maxKeys)
	}
	if startAfter != "" {
		in.StartAfter = aws.String(startAfter)
	}
	var pages [][]string
	for range probePages {
		out, err := bridge.Do(ctx, p.c, bridge.Request{Op: "ListObjectsV2", Key: prefix}, func(ctx context.Context) (*s3.ListObjectsV2Output, error) {
			return p.c.API().ListObjectsV2(ctx, in)
		})
		if err != nil {
			return nil, err
		}
		var page []string
		for _, o := range out.Contents {
			page = append(page, aws.ToString(o.Key))
			if sizes != nil {
				sizes[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
			}
		}
		pages = append(pages, page)
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			return pages, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	return pages, nil
}

// badRequest reports whether the store answered err's request with 400 Bad
// Request.
func badRequest(err error) bool {
	var resp *smithyhttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusBadRequest
}

// cleanupError is the failure to delete a probe's objects: the probe itself
// passed (Run reports it as the delete check's).
type cleanupError struct{ error }

func (e cleanupError) Unwrap() error { return e.error }

// probePages bounds the pages of a listing probe (three keys, two per page).
const probePages = 4

// sameKeys reports whether a page holds exactly keys, in any order.
func sameKeys(page, keys []string) bool {
	return len(page) == len(keys) && !slices.ContainsFunc(keys, func(k string) bool { return !slices.Contains(page, k) })
}

// short shows pages of keys without their common prefix: "[3 2] [1]".
func short(pages [][]string, prefix string) string {
	if len(pages) == 0 {
		return "nothing"
	}
	out := make([]string, len(pages))
	for i, page := range pages {
		keys := make([]string, len(page))
		for j, k := range page {
			keys[j] = strings.TrimPrefix(k, prefix)
		}
		out[i] = fmt.Sprint(keys)
	}
	return strings.Join(out, " ")
}
