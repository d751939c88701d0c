package s3lock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Verify probes whether the store really enforces the conditional writes
// the protocol depends on, with a throwaway object under the probe prefix
// (WithProbePrefix): a second create with If-None-Match: * must be refused,
// If-Match with a wrong ETag must be refused, If-Match with the right ETag
// must succeed, and different bodies must get different ETags; then keys
// must be listed in pages that are ranges of the ascending key order,
// honouring StartAfter. It returns an
// error matching ErrConditionalWritesUnsupported if the store accepted a
// write it should have refused, ErrUnorderedListing if it lists out of
// order, and other errors (ErrAccessDenied, ...) if it could not run the
// probe. The probe objects are deleted afterwards; that needs
// s3:DeleteObject, which s3lock also needs to delete old epochs, so a
// failure to delete them is reported too. ctx bounds the probe (twelve
// requests); the probe objects are deleted even if ctx has ended.
func (c *Client) Verify(ctx context.Context) error {
	if err := c.verifyConditional(ctx); err != nil {
		return err
	}
	return c.verifyListingOrder(ctx)
}

// verifyConditional is Verify's conditional-write probe (five requests).
func (c *Client) verifyConditional(ctx context.Context) (err error) {
	key := c.cfg.probePrefix + "probe-" + randomHex(8) + ".json"
	created := false
	defer func() {
		if !created {
			return
		}
		dctx, cancel := c.detached(ctx)
		defer cancel()
		if derr := c.deleteKey(dctx, key); derr != nil && err == nil {
			err = derr
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

// verifyListingOrder probes whether the store lists keys as finding a
// lock's newest epoch needs (PROTOCOL.md §8): pages that are ranges of the
// ascending key order (their order within a page does not matter: s3lock
// sorts each page), and StartAfter honoured. It writes three keys out of
// order, lists them two per page and again after the first, and deletes
// them: seven requests, the deletion even after ctx ended. A store that
// lists otherwise (S3 directory buckets list in no set order and do not
// support StartAfter) fails with ErrUnorderedListing.
func (c *Client) verifyListingOrder(ctx context.Context) (err error) {
	dir := c.cfg.probePrefix + "order-" + randomHex(8) + "/"
	keys := []string{dir + "1", dir + "2", dir + "3"}
	var written []string
	defer func() {
		dctx, cancel := c.detached(ctx)
		defer cancel()
		if derr := c.deleteKeys(dctx, written); derr != nil && err == nil {
			err = derr
		}
	}()
	body := []byte(`{"s3lockProbe":"order"}`)
	for _, i := range []int{2, 0, 1} { // not in key order
		written = append(written, keys[i]) // before the PUT: one whose answer was lost may have landed
		if _, err := c.putEpoch(ctx, keys[i], "", body); err != nil {
			return err
		}
	}
	sizes := map[string]int64{}
	pages, err := c.listPages(ctx, dir, 2, "", sizes)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if n, ok := sizes[k]; ok && n != int64(len(body)) {
			return fmt.Errorf("%w: s3://%s/%s: the listing gives a size of %d bytes to an object of %d; slot locks read "+
				"what their epochs' sizes say (PROTOCOL.md §14), so s3lock could take a held slot on this store",
				ErrUnorderedListing, c.bucket, k, n, len(body))
		}
	}
	if c.directory {
		return c.checkWholeListing(dir, keys, pages)
	}
	unordered := func(what string) error {
		return fmt.Errorf("%w: s3://%s/%s: %s; s3lock finds a lock's holder in an ordered listing, so it could miss "+
			"the holder on this store: use a general purpose S3 bucket, or a store that passes s3lock verify",
			ErrUnorderedListing, c.bucket, dir, what)
	}
	want := [][]string{keys[:2], keys[2:]}
	if len(pages) != len(want) || !sameKeys(pages[0], want[0]) || !sameKeys(pages[1], want[1]) {
		return unordered(fmt.Sprintf("keys 1, 2, 3 listed two per page came as %s, not [1 2] then [3]", short(pages, dir)))
	}
	after, err := c.listPages(ctx, dir, 0, keys[0], nil)
	if _, status := errorCode(err); status == http.StatusBadRequest {
		return unordered("it refused a listing with StartAfter (" + describeCause(err) + ")")
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
// therefore lists whole (listEpochsWhole): what it needs is that paging
// with continuation tokens shows every key once.
func (c *Client) checkWholeListing(dir string, keys []string, pages [][]string) error {
	seen := slices.Concat(pages...)
	if !sameKeys(seen, keys) {
		return fmt.Errorf("%w: s3://%s/%s: keys 1, 2, 3 listed two per page came as %s, not each once; "+
			"s3lock lists a directory bucket's lock whole and could miss its holder on this store",
			ErrUnorderedListing, c.bucket, dir, short(pages, dir))
	}
	return nil
}

// listPages lists prefix, maxKeys per page (0: the store's default),
// after startAfter (if set), and returns the keys of each page. It stops
// after probePages pages: a store that pages on without end is not one
// s3lock can use either.
func (c *Client) listPages(ctx context.Context, prefix string, maxKeys int32, startAfter string, sizes map[string]int64) ([][]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(c.bucket), Prefix: aws.String(prefix), ExpectedBucketOwner: c.owner()}
	if maxKeys > 0 {
		in.MaxKeys = aws.Int32(maxKeys)
	}
	if startAfter != "" {
		in.StartAfter = aws.String(startAfter)
	}
	var pages [][]string
	for range probePages {
		out, err := c.list(ctx, prefix, in)
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

// CheckStatus is the outcome of one check of a Report.
type CheckStatus string

// The outcomes of a check.
const (
	CheckOK         CheckStatus = "ok"
	CheckFailed     CheckStatus = "failed"      // the store does not do what s3lock needs
	CheckDenied     CheckStatus = "denied"      // the credentials lack the permission
	CheckError      CheckStatus = "error"       // the check could not run to the end
	CheckNotChecked CheckStatus = "not_checked" // an earlier failure prevented the check
)

// Check is one check of a Report: a property of the store, or a permission
// of the credentials.
type Check struct {
	// Name is "conditional writes", "listing order", "list", "get", "put"
	// or "delete".
	Name string
	// Permission is the IAM action the check needs; "" for the probes of
	// the store's behaviour (conditional writes, listing order).
	Permission string
	Status     CheckStatus
	// Detail says what was found, for people; "" when there is nothing
	// to add.
	Detail string
	// Err is the failure behind a status other than CheckOK, if any.
	Err error
}

// Report is what CheckStore found.
type Report struct {
	Bucket string
	// ProbePrefix is where the probes went: the client's WithProbePrefix
	// followed by "s3lock-probe/".
	ProbePrefix string
	Checks      []Check
	// OK is set when every check ran and passed.
	OK bool
	// NoSuchBucket is set when the bucket does not exist: no check could
	// run, whatever their statuses say (the first failed, the others were
	// not checked or failed the same way).
	NoSuchBucket bool
}

// The permission checks of a Report, in order: each S3 operation the
// protocol makes counts for one of them.
var permissionChecks = []struct{ name, permission string }{
	{"list", "s3:ListBucket"}, {"get", "s3:GetObject"}, {"put", "s3:PutObject"}, {"delete", "s3:DeleteObject"},
}

func checkOfOp(op string) string {
	switch op {
	case "ListObjectsV2":
		return "list"
	case "GetObject", "HeadObject":
		return "get"
	case "PutObject":
		return "put"
	case "DeleteObject", "DeleteObjects":
		return "delete"
	}
	return ""
}

// CheckStore checks the bucket before anyone relies on it: the
// conditional-write and listing-order probes of Verify (each its own check;
// the second is not run when the first fails), and whether the credentials may list,
// get, put and delete under the probe prefix, as observed on the requests
// that Verify and one acquire-read-release cycle of a probe lock (named
// "permissions" under the probe prefix; its last epochs stay, like any
// lock's) make. A check passes when the store allowed the request or
// evaluated it (a 404, 304 or 412 answer). It returns an error only when ctx
// ended; every other failure is in the Report.
func (c *Client) CheckStore(ctx context.Context) (Report, error) {
	rep := Report{Bucket: c.bucket, ProbePrefix: c.cfg.probePrefix}
	log := &accessLog{}
	rctx := context.WithValue(ctx, accessLogKey{}, log)
	cond, order, ok := c.checkProtocol(ctx, rctx)
	if !ok {
		return rep, ctx.Err()
	}
	rep.Checks = append(rep.Checks, cond, order)
	c.probeCycle(rctx)
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	for _, p := range permissionChecks {
		ch := log.result(p.name)
		ch.Permission = p.permission
		rep.Checks = append(rep.Checks, ch)
	}
	rep.OK = true
	for _, ch := range rep.Checks {
		rep.OK = rep.OK && ch.Status == CheckOK
		rep.NoSuchBucket = rep.NoSuchBucket || errors.Is(ch.Err, ErrNoSuchBucket)
	}
	return rep, nil
}

// checkProtocol is CheckStore's checks of what the protocol needs of the
// store: conditional writes, then the listing order (not checked when the
// first failed). rctx carries the access log; ok is false when ctx ended.
func (c *Client) checkProtocol(ctx, rctx context.Context) (cond, order Check, ok bool) {
	cond = Check{Name: "conditional writes", Status: CheckOK, Detail: "If-None-Match and If-Match are enforced"}
	order = Check{Name: "listing order", Status: CheckOK, Detail: "pages follow the key order, StartAfter honoured"}
	if c.directory {
		order.Detail = "a directory bucket: listed in no set order, which s3lock reads whole; every key listed once"
	}
	record := func(ch *Check, err error, unsupported error) (stop bool) {
		var opErr *opError
		switch {
		case err == nil:
		case errors.As(err, &opErr) && (opErr.Op == "DeleteObject" || opErr.Op == "DeleteObjects"):
			// The probe passed; only deleting it failed, which the
			// delete check reports.
		case ctx.Err() != nil:
			return true
		case errors.Is(err, unsupported):
			ch.Status, ch.Detail, ch.Err = CheckFailed, causeText(err), err
		default:
			ch.Status, ch.Detail, ch.Err = CheckError, causeText(err), err
		}
		return false
	}
	if record(&cond, c.verifyConditional(rctx), ErrConditionalWritesUnsupported) {
		return cond, order, false
	}
	if cond.Status != CheckOK {
		order.Status, order.Detail = CheckNotChecked, "an earlier check failed"
	} else if record(&order, c.verifyListingOrder(rctx), ErrUnorderedListing) {
		return cond, order, false
	}
	return cond, order, true
}

// probeCycle makes one cycle of a real lock, which exercises list, get and
// put as the protocol uses them; CheckStore reads its outcome from the
// access log rctx carries, not from the errors. The probe lock's name has
// the reserved probe segment, so the calls that check names are bypassed.
func (c *Client) probeCycle(rctx context.Context) {
	if err := c.listKeys(rctx, c.cfg.probePrefix, func(listedKey) {}); err == nil {
		name := c.cfg.probePrefix + "permissions"
		a, _ := c.acquireConfig([]Option{WithoutAutoRenew(), WithLeaseDuration(probeLease)})
		if lease, err := c.tryAcquire(rctx, name, a); err == nil {
			_, _ = c.current(rctx, name)
			if lease.Release(rctx) != nil {
				lease.Detach() // it lapses within probeLease
			}
		}
	}
}

// accessLogKey is the context key of the accessLog CheckStore reads.
type accessLogKey struct{}

// accessLog notes, per permission check, whether the store allowed the
// requests made under a context that carries it.
type accessLog struct {
	mu   sync.Mutex
	seen map[string]Check
}

// noteAccess records the outcome of one request of op in ctx's access log,
// if it has one.
func noteAccess(ctx context.Context, op string, err error) {
	log, ok := ctx.Value(accessLogKey{}).(*accessLog)
	name := checkOfOp(op)
	if !ok || name == "" {
		return
	}
	status, detail := CheckOK, ""
	var corrupt *corruptLeaseError
	if errors.As(err, &corrupt) {
		err = nil // the store answered with the object: the request was allowed
	}
	switch classify(err) {
	case failOther:
		if err != nil {
			status, detail = CheckError, describeCause(err)
		}
	case failAccessDenied, failCredentials:
		status, detail = CheckDenied, describeCause(err)
	case failPrecondition, failNotModified, failNotFound, failConflict:
		// The store evaluated the request's conditions or looked for the
		// object, so the credentials may make it.
	default:
		status, detail = CheckError, describeCause(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.seen == nil {
		log.seen = map[string]Check{}
	}
	if prev, ok := log.seen[name]; ok && prev.Status != CheckOK {
		return // the worst outcome per permission wins
	}
	ch := Check{Name: name, Status: status, Detail: detail}
	if status != CheckOK {
		ch.Err = err
	}
	log.seen[name] = ch
}

func (log *accessLog) result(name string) Check {
	log.mu.Lock()
	defer log.mu.Unlock()
	if c, ok := log.seen[name]; ok {
		return c
	}
	return Check{Name: name, Status: CheckNotChecked, Detail: "an earlier check failed"}
}
