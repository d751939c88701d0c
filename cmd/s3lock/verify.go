package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Check statuses.
const (
	checkOK         = "ok"
	checkFailed     = "failed"      // the store does not do what s3lock needs
	checkDenied     = "denied"      // the credentials lack the permission
	checkError      = "error"       // the check could not run to the end
	checkNotChecked = "not_checked" // an earlier failure prevented the check
)

type check struct {
	Name       string `json:"name"`
	Permission string `json:"permission,omitempty"`
	Status     string `json:"status"`
	Detail     string `json:"detail,omitempty"`
}

type verifyReport struct {
	Bucket      string  `json:"bucket"`
	ProbePrefix string  `json:"probe_prefix"`
	OK          bool    `json:"ok"`
	Checks      []check `json:"checks"`
}

func (a *app) verifyCommand() *cobra.Command {
	var prefix, output string
	cmd := &cobra.Command{
		Use:   "verify [--prefix PREFIX]",
		Short: "Check that the store enforces conditional writes and the credentials may lock",
		Long: `Check the bucket before relying on it:
  conditional writes  the store refuses a second create with If-None-Match: *
                      and a write with If-Match on a wrong ETag (a store that
                      ignores them cannot provide mutual exclusion)
  list, get, put, delete
                      the credentials have s3:ListBucket, s3:GetObject,
                      s3:PutObject and s3:DeleteObject (old epochs are deleted
                      so that acquiring stays cheap) under the lock prefix

The probes write under PREFIX/s3lock-probe/ (give --prefix the prefix your
locks live under when the credentials are limited to it): a throwaway object
that is deleted again, and a lock named PREFIX/s3lock-probe/permissions
that is acquired and released (its last few epochs stay, like any lock's).

Exits 0 only if every check passes; the report goes to stdout (--output json
for a machine-readable one).

` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			if err := a.needBucket(); err != nil {
				return err
			}
			if err := s3lock.ValidateBucket(a.bucket); err != nil {
				return err
			}
			if prefix != "" && !strings.HasSuffix(prefix, "/") {
				prefix += "/" // a prefix of lock names is a path
			}
			probe := prefix + s3lock.DefaultProbePrefix
			if _, err := s3lock.New(noAPI{}, a.bucket, s3lock.WithProbePrefix(probe)); err != nil {
				return usagef("--prefix %q: %v", prefix, err)
			}
			ctx := cmd.Context()
			api, err := a.s3API(ctx)
			if err != nil {
				return err
			}
			rep, err := verifyStore(ctx, api, a.bucket, probe, a.lockOptions(lockConfig{}))
			if err != nil {
				return err
			}
			if err := a.printReport(rep, output); err != nil {
				return err
			}
			if !rep.OK {
				failed := 0
				for _, c := range rep.Checks {
					if c.Status != checkOK {
						failed++
					}
				}
				return exitWith(exitError, fmt.Errorf("%d of %d checks did not pass", failed, len(rep.Checks)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "the prefix the locks live under, e.g. locks/ (probes go under PREFIX/"+s3lock.DefaultProbePrefix+")")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func (a *app) printReport(rep verifyReport, output string) error {
	if output == "json" {
		return a.printJSON(rep)
	}
	fmt.Fprintf(a.stdout, "s3://%s (probes under %s):\n", rep.Bucket, rep.ProbePrefix)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, c := range rep.Checks {
		detail := c.Permission
		if c.Detail != "" {
			if detail != "" {
				detail += ": "
			}
			detail += c.Detail
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, c.Status, detail)
	}
	return tw.Flush()
}

// verifyStore runs the checks with api on bucket. The conditional-write
// probe is the SDK's Verify; the permissions are observed on the requests
// that Verify and one acquire-read-release cycle of a probe lock make, by a
// wrapper around api. It returns an error only when it could not run at all
// (ctx ended).
func verifyStore(ctx context.Context, api s3lock.S3API, bucket, probePrefix string, opts []s3lock.Option) (verifyReport, error) {
	rec := &recorder{S3API: api}
	rep := verifyReport{Bucket: bucket, ProbePrefix: probePrefix}
	c, err := s3lock.New(rec, bucket, append(opts, s3lock.WithProbePrefix(probePrefix))...)
	if err != nil {
		return rep, err
	}

	cond := check{Name: "conditional writes", Status: checkOK, Detail: "If-None-Match and If-Match are enforced"}
	var opErr *s3lock.OpError
	switch err := c.Verify(ctx); {
	case err == nil:
	case errors.As(err, &opErr) && opErr.Op == "DeleteObject":
		// The probe passed; only deleting it failed, which the delete
		// check below reports.
	case ctx.Err() != nil:
		return rep, err
	case errors.Is(err, s3lock.ErrConditionalWritesUnsupported):
		cond.Status, cond.Detail = checkFailed, oneLine(err.Error())
	default:
		cond.Status, cond.Detail = checkError, oneLine(err.Error())
	}
	rep.Checks = append(rep.Checks, cond)

	// One cycle of a real lock exercises list, get and put as the protocol
	// uses them. Its outcome is read from the recorder, not from the errors.
	if _, err := c.List(ctx, probePrefix); err == nil {
		name := probePrefix + "permissions"
		lease, err := c.TryAcquire(ctx, name, s3lock.WithoutAutoRenew(), s3lock.WithLeaseFor(10*s3lock.MinLeaseDuration))
		if err == nil {
			_, _ = c.Current(ctx, name)
			_ = lease.Release(ctx)
		}
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}

	rep.OK = cond.Status == checkOK
	for _, p := range []struct{ name, perm string }{
		{"list", "s3:ListBucket"}, {"get", "s3:GetObject"}, {"put", "s3:PutObject"}, {"delete", "s3:DeleteObject"},
	} {
		ch := rec.result(p.name)
		ch.Permission = p.perm
		rep.Checks = append(rep.Checks, ch)
		rep.OK = rep.OK && ch.Status == checkOK
	}
	return rep, nil
}

// recorder passes requests through and notes, per permission, whether the
// store allowed them.
type recorder struct {
	s3lock.S3API
	mu   sync.Mutex
	seen map[string]check
}

func (r *recorder) note(perm string, err error) {
	status, detail := checkOK, ""
	code, httpStatus := apiError(err)
	switch {
	case err == nil:
	case httpStatus == http.StatusForbidden || code == "AccessDenied":
		status, detail = checkDenied, describe(err)
	case httpStatus == http.StatusNotModified || httpStatus == http.StatusPreconditionFailed ||
		code == "NoSuchKey" || code == "NotFound" || code == "ConditionalRequestConflict":
		// The store evaluated the request's conditions or looked for the
		// object, so the credentials may make it.
	default:
		status, detail = checkError, describe(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]check{}
	}
	// The worst outcome per permission wins.
	if prev, ok := r.seen[perm]; ok && prev.Status != checkOK {
		return
	}
	r.seen[perm] = check{Name: perm, Status: status, Detail: detail}
}

func (r *recorder) result(perm string) check {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.seen[perm]; ok {
		return c
	}
	return check{Name: perm, Status: checkNotChecked, Detail: "an earlier check failed"}
}

func (r *recorder) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := r.S3API.GetObject(ctx, in, opts...)
	r.note("get", err)
	return out, err
}

func (r *recorder) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	out, err := r.S3API.HeadObject(ctx, in, opts...)
	r.note("get", err)
	return out, err
}

func (r *recorder) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := r.S3API.PutObject(ctx, in, opts...)
	r.note("put", err)
	return out, err
}

func (r *recorder) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	out, err := r.S3API.DeleteObject(ctx, in, opts...)
	r.note("delete", err)
	return out, err
}

func (r *recorder) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	out, err := r.S3API.DeleteObjects(ctx, in, opts...)
	if err == nil && len(out.Errors) > 0 {
		e := out.Errors[0]
		err = &smithy.GenericAPIError{Code: deref(e.Code), Message: deref(e.Message)}
	}
	r.note("delete", err)
	return out, err
}

func (r *recorder) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	out, err := r.S3API.ListObjectsV2(ctx, in, opts...)
	r.note("list", err)
	return out, err
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func apiError(err error) (code string, status int) {
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

func describe(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		msg := apiErr.ErrorCode()
		if m := apiErr.ErrorMessage(); m != "" {
			msg += ": " + m
		}
		return msg
	}
	return oneLine(err.Error())
}
