package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfhttp"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

const backendLong = `Serve Terraform's and OpenTofu's http backend from a bucket: the state lives
where Terraform's s3 backend keeps it, and its lock is an s3lock lock, so

  - a run that dies (SIGKILL, a lost runner) leaves no lock behind for long:
    'backend run' frees it the moment its command exits, and the lock of an
    s3lock that dies itself lapses after --lease;
  - state writes are fenced: a run paused past its lease, or force-unlocked,
    can never write over the state of a run that locked after it;
  - runs that wait for the lock wait in line (--order) and are told who holds
    it;
  - plans share the lock: 'terraform plan' runs of one state proceed at
    once and write nothing; every other operation (apply, refresh, import,
    state commands) holds the lock alone, and waits for the plans;
  - plain runs of the s3 backend (use_lockfile = true) on the same state are
    excluded too: s3lock also holds the s3 backend's lock file KEY.tflock
    (but not for plans: the file admits one holder).

The configuration needs only:

  terraform {
    backend "http" {}
  }

and the backend's settings come from TF_HTTP_* variables, which 'backend run'
sets for its command and 'backend serve' tells you how to set.`

// backendFlags are the flags of both backend commands.
type backendFlags struct {
	lease, wait time.Duration
	order       s3lock.Order
	holder      string
	quiet       bool
}

func (bf *backendFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	durationFlag(fs, &bf.lease, "lease", defaultRunLease, "how long the state lock's lease lasts unless renewed: "+
		"the lock of a run whose s3lock died is free this long after the last renewal", leaseSpec)
	durationFlag(fs, &bf.wait, "wait", defaultWait, "how long a lock request waits for a held state lock, in line",
		durationSpec{zero: "0 tries once (Terraform's -lock-timeout then retries)"})
	bf.order = s3lock.OrderFIFO
	fs.Var(orderFlag{&bf.order}, "order", "in which order runs that wait get the state lock: fifo, newest or none (see 's3lock run --help')")
	fs.StringVar(&bf.holder, "holder", "", "identity written into the lease, shown to whoever finds the state locked (env "+envHolder+
		"; default user@host:pid plus a random suffix)")
	fs.BoolVarP(&bf.quiet, "quiet", "q", false, "print no progress while a lock request waits")
}

func (a *app) backendCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backend",
		Short: "Serve Terraform's http backend: state in S3, a lock that lapses, fenced writes",
		Long:  backendLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown backend command %q: use 'backend run' or 'backend serve'", args[0])
			}
			return usagef("missing the backend command: 'backend run' or 'backend serve'")
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.backendRunCommand(), a.backendServeCommand())
	return cmd
}

// backendConfig is the configuration of a server of the states in
// a.bucket: one S3 client for all, a lock client per lock.
func (a *app) backendConfig(ctx context.Context, bf backendFlags) (tfhttp.Config, error) {
	opts, err := a.clientOptions(a.bucket, lockConfig{holder: bf.holder, lease: bf.lease})
	if err != nil {
		return tfhttp.Config{}, err
	}
	api, err := a.s3API(ctx)
	if err != nil {
		return tfhttp.Config{}, err
	}
	return tfhttp.Config{
		API:       api,
		NewClient: func() (*s3lock.Client, error) { return s3lock.New(api, a.bucket, opts...) },
		State: tfstate.Config{Bucket: a.bucket, Lease: bf.lease, Wait: bf.wait,
			Order: bf.order, Objects: a.objects, ExpectedBucketOwner: a.bucketOwner},
		Log:      a.backendLog,
		Progress: a.backendProgress(bf.quiet),
	}, nil
}

// backendLog prints one of the server's events on stderr, on one line and
// with no control character (its text may come from requests or the
// bucket).
func (a *app) backendLog(msg string) {
	fmt.Fprintln(a.stderr, "s3lock backend: "+oneLine(msg))
}

// backendProgress reports a lock request that waits, as run does: who holds
// the lock, and how long the wait may last — in plain lines even on a
// terminal, which Terraform writes to at the same time. A wait for the s3
// backend's lock file of a run without s3lock is reported whenever its
// holder changes.
func (a *app) backendProgress(quiet bool) func(string, time.Duration) (func(error), func()) {
	return func(lock string, limit time.Duration) (func(error), func()) {
		p := newProgress(plainWriter{a.stderr}, lock, limit, quiet || limit == 0, false)
		var mu sync.Mutex
		shown := ""
		observe := func(held error) {
			var h *s3lock.HeldError
			var f *tfstate.LockFileHeldError
			switch {
			case errors.As(held, &h):
				p.observe(h)
			case errors.As(held, &f) && !quiet:
				mu.Lock()
				defer mu.Unlock()
				if f.Info.ID != shown {
					shown = f.Info.ID
					a.backendLog(fmt.Sprintf("waiting (up to %s): %v", limit, f))
				}
			}
		}
		return observe, p.stop
	}
}

// plainWriter hides whether a writer is a terminal.
type plainWriter struct{ io.Writer }

// checkStore reads the state's lock once, so that a missing bucket, wrong
// credentials or an unreachable store are reported before anything runs.
func checkStore(ctx context.Context, cfg tfhttp.Config, key string) error {
	c, err := cfg.NewClient()
	if err != nil {
		return err
	}
	_, err = c.Current(ctx, key+tfstate.LockSuffix)
	return err
}

// stateObjectKey is the key of a workspace's state, as the s3 backend lays
// them out, after checking the key, the workspace and the prefix.
func stateObjectKey(key, workspace, prefix string) (string, error) {
	flagged := func(flag string, err error) error {
		return usagef("%s: %s", flag, strings.TrimPrefix(err.Error(), tfstate.ErrInvalidConfig.Error()+": "))
	}
	if err := tfstate.ValidateKey(key); err != nil {
		return "", flagged("--key", err)
	}
	if workspace == tfstate.DefaultWorkspace {
		return key, nil
	}
	if err := tfstate.ValidateWorkspace(workspace); err != nil {
		return "", flagged("--workspace", err)
	}
	if err := tfstate.ValidateWorkspaceKeyPrefix(prefix); err != nil {
		return "", flagged("--workspace-key-prefix", err)
	}
	full := tfstate.StateKey(prefix, workspace, key)
	if err := tfstate.ValidateKey(full); err != nil {
		return "", flagged("--workspace", err)
	}
	return full, nil
}

// isLoopback reports whether a listen address's host is a loopback address
// (or localhost): reachable from this host only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
