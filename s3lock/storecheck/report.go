package storecheck

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/internal/bridge"
)

// Status is the outcome of one check of a Report.
type Status string

// The outcomes of a check.
const (
	StatusOK         Status = "ok"
	StatusFailed     Status = "failed"      // the store does not do what s3lock needs
	StatusDenied     Status = "denied"      // the credentials lack the permission
	StatusError      Status = "error"       // the check could not run to the end
	StatusNotChecked Status = "not_checked" // an earlier failure prevented the check
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
	Status     Status
	// Detail says what was found, for people; "" when there is nothing
	// to add.
	Detail string
	// Err is the failure behind a status other than StatusOK, if any.
	Err error
}

// Report is what Run found.
type Report struct {
	Bucket string
	// ProbePrefix is where the probes went: the prefix given to Run
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

// Run checks the bucket before anyone relies on it: the conditional-write
// and listing-order probes of Verify (each its own check; the second is
// not run when the first fails), and whether the credentials may list, get,
// put and delete under the probe prefix, as observed on the requests that
// Verify and one acquire-read-release cycle of a probe lock (named
// "permissions" under the probe prefix; its last epochs stay, like any
// lock's) make. A check passes when the store allowed the request or
// evaluated it (a 404, 304 or 412 answer). prefix is the lock name prefix
// the locks live under, as for Verify. Run returns an error only when ctx
// ended or prefix is not valid (s3lock.ErrInvalidConfig); every other
// failure is in the Report.
func Run(ctx context.Context, client *s3lock.Client, prefix string) (Report, error) {
	p, err := newProbe(client, prefix)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Bucket: p.c.Bucket(), ProbePrefix: p.prefix}
	log := &accessLog{}
	rctx := bridge.WithRequestLog(ctx, log.note)
	cond, order, ok := p.checkProtocol(ctx, rctx)
	if !ok {
		return rep, ctx.Err()
	}
	rep.Checks = append(rep.Checks, cond, order)
	p.c.ProbeCycle(rctx, p.prefix)
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	for _, pc := range permissionChecks {
		ch := log.result(pc.name)
		ch.Permission = pc.permission
		rep.Checks = append(rep.Checks, ch)
	}
	rep.OK = true
	for _, ch := range rep.Checks {
		rep.OK = rep.OK && ch.Status == StatusOK
		rep.NoSuchBucket = rep.NoSuchBucket || errors.Is(ch.Err, s3lock.ErrNoSuchBucket)
	}
	return rep, nil
}

// checkProtocol is Run's checks of what the protocol needs of the store:
// conditional writes, then the listing order (not checked when the first
// failed). rctx carries the access log; ok is false when ctx ended.
func (p probe) checkProtocol(ctx, rctx context.Context) (cond, order Check, ok bool) {
	cond = Check{Name: "conditional writes", Status: StatusOK, Detail: "If-None-Match and If-Match are enforced"}
	order = Check{Name: "listing order", Status: StatusOK, Detail: "pages follow the key order, StartAfter honoured"}
	if p.c.Directory() {
		order.Detail = "a directory bucket: listed in no set order, which s3lock reads whole; every key listed once"
	}
	record := func(ch *Check, err error, unsupported error) (stop bool) {
		switch {
		case err == nil:
		case errors.As(err, new(cleanupError)):
			// The probe passed; only deleting it failed, which the
			// delete check reports.
		case ctx.Err() != nil:
			return true
		case errors.Is(err, unsupported):
			ch.Status, ch.Detail, ch.Err = StatusFailed, causeText(err), err
		default:
			ch.Status, ch.Detail, ch.Err = StatusError, causeText(err), err
		}
		return false
	}
	if record(&cond, p.conditional(rctx), s3lock.ErrConditionalWritesUnsupported) {
		return cond, order, false
	}
	if cond.Status != StatusOK {
		order.Status, order.Detail = StatusNotChecked, "an earlier check failed"
	} else if record(&order, p.listingOrder(rctx), s3lock.ErrUnorderedListing) {
		return cond, order, false
	}
	return cond, order, true
}

// causeText is err's message without the "s3lock: " that starts s3lock's
// errors, for a check's Detail.
func causeText(err error) string {
	return strings.TrimPrefix(err.Error(), "s3lock: ")
}

// accessLog notes, per permission check, whether the store allowed the
// requests made under a context that carries it (bridge.WithRequestLog).
type accessLog struct {
	mu   sync.Mutex
	seen map[string]Check
}

// note records the outcome of one request of op.
func (log *accessLog) note(op string, err error) {
	name := checkOfOp(op)
	if name == "" {
		return
	}
	if errors.Is(err, s3lock.ErrCorruptLease) {
		err = nil // the store answered with the object: the request was allowed
	}
	status, detail := StatusOK, ""
	switch bridge.ClassOf(err) {
	case bridge.Other:
		if err != nil {
			status, detail = StatusError, bridge.Describe(err)
		}
	case bridge.Denied:
		status, detail = StatusDenied, bridge.Describe(err)
	case bridge.Precondition, bridge.NotModified, bridge.NotFound, bridge.Conflict:
		// The store evaluated the request's conditions or looked for the
		// object, so the credentials may make it.
	default:
		status, detail = StatusError, bridge.Describe(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.seen == nil {
		log.seen = map[string]Check{}
	}
	if prev, ok := log.seen[name]; ok && prev.Status != StatusOK {
		return // the worst outcome per permission wins
	}
	ch := Check{Name: name, Status: status, Detail: detail}
	if status != StatusOK {
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
	return Check{Name: name, Status: StatusNotChecked, Detail: "an earlier check failed"}
}
