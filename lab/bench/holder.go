package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// runHolder is `bench holder`: the s3lock holder process of the handoff
// measurements. It takes the lock with TryAcquire, prints "held EPOCH", and
// holds it (renewing in the background, as any holder does) until its
// standard input closes; then it releases the lock and exits. The crash
// measurement SIGKILLs it instead, so it stops renewing with no chance to
// clean up.
func runHolder(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench holder", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "S3 endpoint URL")
	name := fs.String("name", "", "lock name")
	lease := fs.Duration("lease", s3lock.DefaultLeaseDuration, "lease duration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	api, err := newS3Client(ctx, *endpoint, nil)
	if err != nil {
		return err
	}
	locks, err := lockClient(api, "bench-holder", s3lock.WithLeaseDuration(*lease))
	if err != nil {
		return err
	}
	l, err := locks.TryAcquire(ctx, *name)
	if err != nil {
		return err
	}
	fmt.Println("held", l.Token().Epoch)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it, or dies
	return l.Release(context.WithoutCancel(ctx))
}

// holderProc is a running `bench holder` that holds the lock.
type holderProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
}

// holderStartLimit bounds how long a holder process may take to start and
// take a free lock.
const holderStartLimit = 30 * time.Second

// startHolder starts `bench holder` on the lock name through endpoint and
// returns once it holds the lock.
func (l *lab) startHolder(ctx context.Context, endpoint, name string, lease time.Duration) (*holderProc, error) {
	cmd := exec.CommandContext(ctx, l.self, "holder", "-endpoint", endpoint, "-name", name, "-lease", lease.String())
	h := &holderProc{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = h.stderr
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.HasPrefix(s, "held ") {
			return h, nil
		}
	case <-time.After(holderStartLimit):
	}
	h.crash()
	return nil, fmt.Errorf("bench holder did not take the lock %s: %s", name, strings.TrimSpace(h.stderr.String()))
}

// release makes the holder release the lock, and waits until it has exited.
func (h *holderProc) release() error {
	_ = h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		return fmt.Errorf("%s (bench holder: %w)", strings.TrimPrefix(strings.TrimSpace(h.stderr.String()), "bench: "), err)
	}
	return nil
}

// crash SIGKILLs the holder and returns when it was killed.
func (h *holderProc) crash() time.Time {
	at := time.Now()
	_ = h.cmd.Process.Kill()
	var exit *exec.ExitError
	if err := h.cmd.Wait(); err != nil && !errors.As(err, &exit) {
		logf("bench holder: %v", err)
	}
	return at
}
