package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// binary is the s3lock executable built once for the tests, which drive it
// as a user would: as a separate process, against the local S3 server.
var binary string

func TestMain(m *testing.M) {
	asTerraform() // when the test runs this binary as a Terraform process
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "s3lock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "s3lock")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building s3lock:", err)
		return 1
	}
	code := s3test.Main(m)
	if code == 0 {
		// The in-process tests (verify's probe lease, the progress printer)
		// must not leave goroutines behind; idle HTTP connections may stay.
		if err := s3test.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
}

// processLimit bounds every s3lock process a test starts, so that a hang
// fails the test instead of the whole run. It is a safeguard, not an assertion
// on speed.
const processLimit = 2 * time.Minute

// cli is one test's view of the tool: a fresh bucket on the local server, an
// environment that points s3lock at it, and an SDK client to check what
// s3lock did.
type cli struct {
	t   *testing.T
	ns  *s3test.Namespace
	sdk *s3lock.Client
	env []string
	dir string // scratch directory, also the processes' HOME
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	ns := s3test.New(t)
	sdk, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("test-sdk"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cli{t: t, ns: ns, sdk: sdk, dir: t.TempDir()}
	tg := ns.Target
	// Start from the test's environment without any AWS or s3lock setting
	// of the machine, so that only what is set here is in effect.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "S3LOCK_") || (strings.HasPrefix(k, "AWS_") && tg.AccessKey != "") || k == "HOME" {
			continue
		}
		c.env = append(c.env, kv)
	}
	c.env = append(c.env,
		"HOME="+c.dir,
		"S3LOCK_BUCKET="+ns.Bucket,
		"S3LOCK_USE_PATH_STYLE="+fmt.Sprint(tg.PathStyle),
	)
	if tg.Endpoint != "" {
		c.env = append(c.env, "S3LOCK_ENDPOINT="+tg.Endpoint)
	}
	if tg.AccessKey != "" {
		c.env = append(c.env,
			"AWS_ACCESS_KEY_ID="+tg.AccessKey,
			"AWS_SECRET_ACCESS_KEY="+tg.SecretKey,
			"AWS_REGION="+tg.Region,
			"AWS_CONFIG_FILE="+filepath.Join(c.dir, "aws-config"),
			"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(c.dir, "aws-credentials"),
			"AWS_EC2_METADATA_DISABLED=true",
		)
	}
	return c
}

// name returns a lock name inside the test's namespace.
func (c *cli) name(s string) string { return c.ns.Name(s) }

// without returns the environment without the variables named.
func (c *cli) without(names ...string) []string {
	var env []string
	for _, kv := range c.env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// command returns an s3lock process with the test environment plus extra
// variables; the caller starts it.
func (c *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{}, c.env...)
	cmd.Dir = c.dir
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// run runs s3lock to completion with the test environment.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runWith(c.env, "", args...)
}

// runWith runs s3lock with env (replacing the test environment) and stdin.
func (c *cli) runWith(env []string, stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), processLimit)
	defer cancel()
	cmd := c.command(ctx, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		c.t.Fatalf("s3lock %q did not finish within %s\nstderr: %s", args, processLimit, r.stderr)
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		c.t.Fatalf("running s3lock %q: %v", args, err)
	}
	return r
}

// mustRun runs s3lock and fails the test unless it exits 0.
func (c *cli) mustRun(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("s3lock %q: %s", args, r)
	}
	return r
}

// current reads the lock's state with the SDK.
func (c *cli) current(name string) s3lock.State {
	c.t.Helper()
	st, err := c.sdk.Current(c.t.Context(), name)
	if err != nil {
		c.t.Fatalf("Current(%s): %v", name, err)
	}
	return st
}

// fileHas reports whether the file at path contains s.
func fileHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// waitExit waits for a started process and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &exitErr):
			return exitErr.ExitCode()
		default:
			t.Fatalf("waiting for s3lock: %v", err)
		}
	case <-time.After(processLimit):
		_ = cmd.Process.Kill()
		t.Fatalf("s3lock did not exit within %s", processLimit)
	}
	return -1
}

// queued is an `s3lock run` that waits for a lock; its command appends its
// holder name to the test's log file, so the log shows the order of service.
type queued struct {
	who    string
	cmd    *exec.Cmd
	stderr *testkit.Buffer
}

// startQueued starts `s3lock run --holder who` on name with extra flags; its
// command appends who to log.
func (c *cli) startQueued(name, who, log string, flags ...string) *queued {
	c.t.Helper()
	argv := append([]string{"run", "--holder", who, "--wait", "2m"}, flags...)
	argv = append(argv, name, "--", "sh", "-c", `echo "$0" >> "$1"`, who, log)
	return c.start(who, argv...)
}

// start starts s3lock with args as who's run, keeping its stderr; the test
// kills it at the end if it still runs.
func (c *cli) start(who string, args ...string) *queued {
	c.t.Helper()
	q := &queued{who: who, cmd: c.command(c.t.Context(), args...), stderr: &testkit.Buffer{}}
	q.cmd.Stderr = q.stderr
	if err := q.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = q.cmd.Process.Kill() })
	return q
}

// mustSucceed waits for the run and fails the test unless it exits 0.
func (q *queued) mustSucceed(t *testing.T) {
	t.Helper()
	if code := waitExit(t, q.cmd); code != 0 {
		t.Fatalf("%s exited %d; stderr: %s", q.who, code, q.stderr.String())
	}
}

// served returns the holder names in the log, in the order they ran.
func served(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// line returns the line of the lock name as the SDK reads it.
func (c *cli) line(name string) []s3lock.Waiter {
	c.t.Helper()
	ws, err := c.sdk.Line(c.t.Context(), name)
	if err != nil {
		c.t.Fatalf("Line(%s): %v", name, err)
	}
	return ws
}

// waitInLine waits until who is in the line of name.
func (c *cli) waitInLine(name, who string) {
	c.t.Helper()
	testkit.Eventually(c.t, time.Minute, who+" to join the line", func() bool {
		return slices.Contains(lineHolders(c.line(name)), who)
	})
}

// lineHolders returns who waits in a line, in its order.
func lineHolders(ws []s3lock.Waiter) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Holder)
	}
	return out
}
