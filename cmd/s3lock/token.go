package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

const tokenHelp = `The token is the JSON that 's3lock acquire' prints. --token takes it as:
  '{"bucket":...}'  the JSON itself
  @FILE             read from FILE
  -                 read from standard input
Without --token, the token is read from the environment variable ` + envToken + `.
A token renews and releases its lease, but it is no key: its nonce is in the
lease's object too, which anyone with s3:GetObject on the lock's keys can read.
What guards leases is who may write those keys (s3:PutObject).`

// tokenOutput is what acquire and renew print: the SDK's Token (all that
// release and renew read back) plus fields for scripts.
type tokenOutput struct {
	s3lock.Token
	Key           string    `json:"key"`
	Holder        string    `json:"holder"`
	ExpiresAt     time.Time `json:"expires_at"`
	LeaseDuration string    `json:"lease_duration"`
	// HeldUntilAtMost is the lease's cap (--max-hold), left out without one.
	HeldUntilAtMost time.Time `json:"held_until_at_most,omitzero"`
}

func tokenOf(l *s3lock.Lease) tokenOutput {
	return tokenOutput{
		Token:           l.Token(),
		Key:             l.Token().Key(),
		Holder:          l.State().Holder,
		ExpiresAt:       l.State().ExpiresAt.UTC().Truncate(time.Millisecond),
		LeaseDuration:   l.State().LeaseDuration.String(),
		HeldUntilAtMost: l.State().HeldUntilAtMost.UTC(),
	}
}

func (a *app) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.stdout, string(b))
	return err
}

func (a *app) acquireCommand() *cobra.Command {
	var af acquireFlags
	cmd := &cobra.Command{
		Use:   "acquire [flags] NAME",
		Short: "Acquire a lock and print its lease token, for multi-step pipelines",
		Long: `Acquire the lock NAME and print a lease token (one line of JSON) on stdout.
The lease is not renewed in the background: it lasts --lease (default 10m)
unless a later step runs 's3lock renew'. A later step releases it with
's3lock release'.

The token's fields: bucket, name, epoch, nonce (what release and renew need;
with --slots N > 1 also slot and slots: the slot held, whose epoch it is, and
N; with --shared also share: the id of the share held, whose shared epoch
epoch is), key, holder, expires_at (RFC 3339, when this lease stops being
trusted unless renewed), lease_duration and, with --max-hold,
held_until_at_most.

With --max-hold D, 's3lock renew' does not extend the lease past D after it
was acquired; once that time has come, renew fails with exit code 4 and the
lease lapses within seconds.

Renew (and release) well before expires_at: a later step reads the lease back
from the store and counts its age by the store's clock, allowing 2s for how
far that clock's Date may lag and a second for its resolution, so from 2-3s
before expires_at renew and release fail with exit code 4 ("it has lapsed")
although status still shows the lock held, and the lease lapses on its own.
Renew at half the lease, say.

` + expiryHelp + `

  token="$(s3lock acquire --lease 30m deploy/prod)"   # on its own line, so a failure stops the script
  export ` + envToken + `="$token"
  ... steps; fencing token: $(echo "$` + envToken + `" | jq .epoch)
  s3lock renew      # optional, extends by --lease again
  s3lock release

Waiting: if the lock is held, acquire waits up to --wait (default 5m; 0 tries
once) and reports who holds it on stderr.

` + orderHelp + `

` + slotsHelp + `

` + sharedHelp + `

` + exitCodesHelp,
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.needBucket(); err != nil {
				return err
			}
			if err := s3lock.ValidateName(args[0]); err != nil {
				return err
			}
			if err := af.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client(ctx, a.bucket, af.lock)
			if err != nil {
				return err
			}
			lease, err := a.acquire(ctx, c, args[0], af, s3lock.WithoutAutoRenew())
			if err != nil {
				return err
			}
			lease.Detach()
			if err := a.printJSON(tokenOf(lease)); err != nil {
				// Nobody could release the lease without its token.
				return errors.Join(err, a.release(lease))
			}
			return nil
		},
	}
	af.register(cmd, defaultTokenLease)
	return cmd
}

func (a *app) renewCommand() *cobra.Command {
	var token, output string
	cmd := &cobra.Command{
		Use:   "renew --token TOKEN",
		Short: "Renew a lease held by a token, and print its new expiry",
		Long: `Renew the lease of a token printed by 's3lock acquire': extend it by its lease
duration, counted from now. Prints the new expiry (RFC 3339) on stdout, or with
--output json a new token (the same fields as acquire prints).

The lease must still be held: if it lapsed or was force-released, renew fails
with exit code 4.

` + tokenHelp + "\n\n" + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			ctx := cmd.Context()
			tok, lease, err := a.resume(ctx, cmd, token)
			if releasedAlready(err) {
				// A release already done is no lost lease (exit 4):
				// there is only nothing left to renew (exit 1).
				return &exitErr{code: exitError, hint: true,
					err: fmt.Errorf("%s (epoch %d) was already released; a released lease cannot be renewed", leaseText(tok), tok.Epoch)}
			}
			if err != nil {
				return err
			}
			defer lease.Detach()
			if err := lease.Renew(ctx); err != nil {
				return err
			}
			if output == "json" {
				return a.printJSON(tokenOf(lease))
			}
			_, err = fmt.Fprintln(a.stdout, lease.State().ExpiresAt.UTC().Format(time.RFC3339))
			return err
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the lease token: JSON, @FILE or - for stdin (env "+envToken+")")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text (the expiry) or json (a new token)")
	return cmd
}

func (a *app) releaseCommand() *cobra.Command {
	var token string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "release --token TOKEN",
		Short: "Release a lease held by a token",
		Long: `Release the lease of a token printed by 's3lock acquire', so the next acquirer
gets the lock at once. Releasing a lease that this token already released
succeeds. If the lease was lost before (it lapsed, or was force-released),
release fails with exit code 4: the work done under it may not have been
exclusive. A share (acquire --shared) is deleted when it is released:
releasing it again finds nothing and fails with exit code 4 too, as does
releasing a share an operator force-released.

` + tokenHelp + "\n\n" + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			tok, lease, err := a.resume(ctx, cmd, token)
			if releasedAlready(err) {
				if !quiet {
					fmt.Fprintf(a.stderr, "s3lock: %s (epoch %d) was already released\n", leaseText(tok), tok.Epoch)
				}
				return nil
			}
			if err != nil {
				return err
			}
			if err := a.release(lease); err != nil {
				return err
			}
			if !quiet {
				fmt.Fprintf(a.stderr, "s3lock: released %s (epoch %d)\n", leaseText(lease.Token()), lease.Token().Epoch)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the lease token: JSON, @FILE or - for stdin (env "+envToken+")")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing on success")
	return cmd
}

// maxTokenBytes bounds what --token reads from stdin (-) or a file (@FILE):
// a token is a few hundred bytes, and a wrong pipe or file (/dev/zero) must
// not fill the memory.
const maxTokenBytes = 64 << 10

// readToken returns the token given by --token (JSON, @FILE or -) or by
// $S3LOCK_TOKEN.
func (a *app) readToken(cmd *cobra.Command, arg string) (s3lock.Token, error) {
	raw := arg
	switch {
	case !cmd.Flags().Changed("token"):
		raw = os.Getenv(envToken)
		if raw == "" {
			return s3lock.Token{}, usagef("no lease token: pass --token (JSON, @FILE or -) or set %s", envToken)
		}
	case arg == "-":
		if isTerminal(a.stdin) {
			fmt.Fprintln(a.stderr, "s3lock: reading the lease token from standard input (paste it, then Ctrl-D; Ctrl-C stops)")
		}
		var err error
		if raw, err = readCancellable(cmd.Context(), "standard input", func() (string, error) {
			return readTokenFrom(a.stdin, "standard input")
		}); err != nil {
			return s3lock.Token{}, err
		}
	case strings.HasPrefix(arg, "@"):
		var err error
		if raw, err = readCancellable(cmd.Context(), arg[1:], func() (string, error) {
			f, err := os.Open(arg[1:]) // a FIFO without a writer blocks here
			if err != nil {
				return "", usagef("reading the token: %v", err)
			}
			defer f.Close()
			return readTokenFrom(f, arg[1:])
		}); err != nil {
			return s3lock.Token{}, err
		}
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return s3lock.Token{}, usagef("the lease token is empty")
	}
	return s3lock.ParseToken(raw)
}

// readCancellable returns what read returns, or stops waiting for it when
// ctx ends (a signal): a terminal, a pipe or a FIFO without a writer may
// block read for ever, and SIGINT and SIGTERM went unheeded. The read is
// left behind; the process is about to exit.
func readCancellable(ctx context.Context, from string, read func() (string, error)) (string, error) {
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := read()
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
		return "", &stoppedError{msg: fmt.Sprintf("stopped reading the token from %s: %v", from, context.Cause(ctx)), err: ctx.Err()}
	}
}

// stoppedError is a read that a signal stopped: it says so in words and
// matches the context's error (so the exit code is the signal's).
type stoppedError struct {
	msg string
	err error
}

func (e *stoppedError) Error() string { return e.msg }
func (e *stoppedError) Unwrap() error { return e.err }

// readTokenFrom reads a token from r (named from in errors), refusing more
// than maxTokenBytes: a file or pipe that never ends (/dev/zero) must not
// fill memory.
func readTokenFrom(r io.Reader, from string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTokenBytes+1))
	if err != nil {
		return "", usagef("reading the token from %s: %v", from, err)
	}
	if len(b) > maxTokenBytes {
		return "", usagef("the token in %s is larger than %d KiB: a token is a few hundred bytes of JSON, as 's3lock acquire' prints it",
			from, maxTokenBytes>>10)
	}
	return string(b), nil
}

// tokenClient reads the token and returns it with a client for its bucket
// (the token's, unless --bucket or S3LOCK_BUCKET names one, which must then
// match).
func (a *app) tokenClient(ctx context.Context, cmd *cobra.Command, arg string) (s3lock.Token, *s3lock.Client, error) {
	tok, err := a.readToken(cmd, arg)
	if err != nil {
		return tok, nil, err
	}
	bucket := a.bucket
	if bucket == "" {
		bucket = tok.Bucket
	}
	c, err := a.client(ctx, bucket, lockConfig{})
	return tok, c, err
}

// resume takes over the lease of a token, without renewing it in the
// background. It returns the token also when the lease is over.
func (a *app) resume(ctx context.Context, cmd *cobra.Command, arg string) (s3lock.Token, *s3lock.Lease, error) {
	tok, c, err := a.tokenClient(ctx, cmd, arg)
	if err != nil {
		return tok, nil, err
	}
	lease, err := c.Resume(ctx, tok, s3lock.WithoutAutoRenew())
	return tok, lease, err
}

// leaseText names what the lease of t holds, for messages: `lock "x"`,
// `slot 2 of 3 of lock "x"` (`slot 2 of lock "x"` when t does not say how
// many), or `share 1a2b3c4d5e6f7a8b of lock "x"`.
func leaseText(t s3lock.Token) string {
	switch {
	case t.Share != "":
		return fmt.Sprintf("share %s of lock %q", t.Share, t.Name)
	case t.Slot > 0 && t.Slots > 0:
		return fmt.Sprintf("slot %d of %d of lock %q", t.Slot, t.Slots, t.Name)
	case t.Slot > 0:
		return fmt.Sprintf("slot %d of lock %q", t.Slot, t.Name)
	}
	return fmt.Sprintf("lock %q", t.Name)
}

// releasedAlready reports whether err says that a token's lease was
// released through another handle (an earlier release with the token): a
// release already done, not a lease lost.
func releasedAlready(err error) bool {
	var lost *s3lock.LeaseLostError
	return errors.As(err, &lost) && lost.Reason == s3lock.LostReleased
}
