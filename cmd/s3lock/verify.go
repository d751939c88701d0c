package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// check is one check in verify's report: the SDK's storecheck.Check as the
// report prints it.
type check struct {
	Name       string            `json:"name"`
	Permission string            `json:"permission,omitempty"`
	Status     storecheck.Status `json:"status"`
	Detail     string            `json:"detail,omitempty"`
}

// verifyReport is verify's report: the SDK's storecheck.Report as it prints it.
type verifyReport struct {
	Bucket      string  `json:"bucket"`
	ProbePrefix string  `json:"probe_prefix"`
	OK          bool    `json:"ok"`
	Checks      []check `json:"checks"`
}

// reportOf translates the SDK's report for printing.
func reportOf(rep storecheck.Report) verifyReport {
	out := verifyReport{Bucket: rep.Bucket, ProbePrefix: rep.ProbePrefix, OK: rep.OK, Checks: make([]check, 0, len(rep.Checks))}
	for _, c := range rep.Checks {
		out.Checks = append(out.Checks, check{Name: c.Name, Permission: c.Permission, Status: c.Status, Detail: oneLine(c.Detail)})
	}
	return out
}

const verifyLong = `Check the bucket before relying on it:
  conditional writes  the store refuses a second create with If-None-Match: *
                      and a write with If-Match on a wrong ETag (a store that
                      ignores them cannot provide mutual exclusion)
  listing order       keys are listed in ascending order, honouring StartAfter;
                      on an S3 directory bucket (BASE--ZONE--x-s3), which
                      lists in no order and which s3lock reads whole, that
                      paging shows every key once; and that listings report
                      each object's size as written (slot locks read them)
  list, get, put, delete
                      the credentials have s3:ListBucket, s3:GetObject,
                      s3:PutObject and s3:DeleteObject (old epochs are deleted
                      so that acquiring stays cheap) under the lock prefix

The probes write under PREFIX/s3lock-probe/ (give --prefix the prefix your
locks live under when the credentials are limited to it): throwaway objects
that are deleted again, and a lock named PREFIX/s3lock-probe/permissions
that is acquired and released (its last few epochs stay, like any lock's).

Exits 0 only if every check passes; the report goes to stdout (--output json
for a machine-readable one).

` + exitCodesHelp

func (a *app) verifyCommand() *cobra.Command {
	var prefix, output string
	cmd := &cobra.Command{
		Use:   "verify [--prefix PREFIX]",
		Short: "Check that the store enforces conditional writes, lists in order, and the credentials may lock",
		Long:  verifyLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			return a.verify(cmd, prefix, output)
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "the prefix the locks live under, e.g. locks/ (probes go under PREFIX/s3lock-probe/)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// verify runs the SDK's store check with its probes under prefix, prints the
// report and fails unless every check passed.
func (a *app) verify(cmd *cobra.Command, prefix, output string) error {
	if err := a.needBucket(); err != nil {
		return err
	}
	if err := s3lock.ValidateConfig(a.bucket); err != nil {
		return err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/" // a prefix of lock names is a path
	}
	if err := s3lock.ValidatePrefix(prefix); err != nil {
		return usagef("--prefix: %w", err)
	}
	ctx := cmd.Context()
	c, err := a.client(ctx, a.bucket, lockConfig{})
	if err != nil {
		return err
	}
	rep, err := storecheck.Run(ctx, c, prefix)
	if err != nil {
		return err
	}
	out := reportOf(rep)
	if err := a.printReport(out, output); err != nil {
		return err
	}
	if !out.OK {
		return exitWith(exitError, verifyFailure(a.bucket, rep))
	}
	return nil
}

// verifyFailure says which checks did not pass, apart from those an earlier
// failure kept from running; a missing bucket, which keeps every check from
// running, is said as such.
func verifyFailure(bucket string, rep storecheck.Report) error {
	var failed, unchecked []string
	if rep.NoSuchBucket {
		return fmt.Errorf("the bucket %s does not exist (NoSuchBucket), so no check could run: create it or correct its name", bucket)
	}
	for _, c := range rep.Checks {
		switch {
		case c.Status == storecheck.StatusOK:
		case c.Status == storecheck.StatusNotChecked:
			unchecked = append(unchecked, c.Name)
		case c.Status != storecheck.StatusFailed:
			failed = append(failed, c.Name)
		case errors.Is(c.Err, s3lock.ErrConditionalWritesUnsupported):
			failed = append(failed, c.Name+" (this store does not enforce S3 conditional writes, so s3lock cannot provide mutual exclusion on it)")
		case errors.Is(c.Err, s3lock.ErrUnorderedListing):
			failed = append(failed, c.Name+" (this store does not list keys in order, so s3lock could miss a lock's holder on it)")
		default:
			failed = append(failed, c.Name)
		}
	}
	msg := fmt.Sprintf("%d of %d checks did not pass: %s", len(failed), len(rep.Checks), strings.Join(failed, ", "))
	if len(unchecked) > 0 {
		msg += fmt.Sprintf("; %d could not run after them: %s", len(unchecked), strings.Join(unchecked, ", "))
	}
	return errors.New(msg)
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
