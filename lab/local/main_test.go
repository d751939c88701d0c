package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// envMain makes the test binary run main, as make local runs it.
const envMain = "S3LOCK_TEST_LOCAL_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLocal_ExportsReachTheStore starts make local's store as a user does,
// takes only the lines it prints for the shell, and with exactly those
// acquires and releases a lock with the built CLI and with the SDK on the
// AWS SDK's default configuration; then Ctrl-C (SIGINT) stops it cleanly.
func TestLocal_ExportsReachTheStore(t *testing.T) {
	ctx := t.Context()
	tmp := t.TempDir()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(tmp, "s3lock")
	if err := tfharness.Build(ctx, root, "./cmd/s3lock", cli); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, "-port", strconv.Itoa(port), "-dir", filepath.Join(tmp, "s3"), "-bucket", "try-local")
	cmd.Env = append(os.Environ(), envMain+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	printed := bufio.NewReader(out)
	exports, unset := readExports(t, printed)
	if exports["S3LOCK_BUCKET"] != "try-local" || !strings.Contains(exports["AWS_ENDPOINT_URL_S3"], ":"+strconv.Itoa(port)) {
		t.Fatalf("exports %v: want the bucket and the port asked for", exports)
	}

	// The CLI, with the printed variables and nothing of this machine's.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp}
	for k, v := range exports {
		env = append(env, k+"="+v)
	}
	token := runCLI(t, cli, env, "acquire", "local/try")
	runCLI(t, cli, env, "release", "--token", strings.TrimSpace(token))

	// The SDK, through the AWS SDK's default configuration.
	t.Setenv("HOME", tmp)
	for _, k := range unset {
		t.Setenv(k, "")
	}
	for k, v := range exports {
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	locks, err := s3lock.New(s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), exports["S3LOCK_BUCKET"])
	if err != nil {
		t.Fatal(err)
	}
	if err := locks.Do(ctx, "local/sdk", func(context.Context, *s3lock.Lease) error { return nil }); err != nil {
		t.Fatalf("the SDK with the printed exports: %v", err)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(printed)
	if err := waitExit(cmd, 10*time.Second); err != nil {
		t.Fatalf("after SIGINT: %v", err)
	}
	if !strings.Contains(string(rest), "stopped") {
		t.Errorf("after SIGINT it printed %q; want it to say it stopped", rest)
	}
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		t.Errorf("port %d still taken after the stop: %v", port, err)
	} else {
		_ = l.Close()
	}
}

// TestLocal_PortTaken: a port in use is refused up front, naming the way
// out, before versitygw could meet the other server's health check.
func TestLocal_PortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	err = run(t.Context(), io.Discard, settings{port: port, dir: t.TempDir(), bucket: defaultBucket})
	if err == nil || !strings.Contains(err.Error(), "make local PORT=") {
		t.Fatalf("run on a taken port = %v; want an error naming make local PORT=", err)
	}
}

// TestLocal_BadSettingsAreRefused: a port outside 1-65535 was reported as
// "taken", and a bucket name S3 refuses failed only at the create.
func TestLocal_BadSettingsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		s    settings
		says string
	}{
		{settings{port: 0, bucket: defaultBucket}, "port 0 is not a TCP port"},
		{settings{port: -1, bucket: defaultBucket}, "port -1 is not a TCP port"},
		{settings{port: 70000, bucket: defaultBucket}, "port 70000 is not a TCP port"},
		{settings{port: defaultPort, bucket: "Bad_Bucket"}, `bucket "Bad_Bucket"`},
		{settings{port: defaultPort, bucket: ""}, `bucket ""`},
	} {
		tc.s.dir = t.TempDir()
		if err := run(t.Context(), io.Discard, tc.s); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("run(%+v) = %v; want an error saying %q", tc.s, err, tc.says)
		}
	}
}

// TestLocal_ReadmeShowsTheExports: the README's quick start shows the
// lines make local prints for the shell on its default port, as printed.
func TestLocal_ReadmeShowsTheExports(t *testing.T) {
	t.Parallel()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	printExports(&printed, "http://127.0.0.1:"+strconv.Itoa(defaultPort), "/dir", defaultBucket)
	for line := range strings.Lines(printed.String()) {
		if strings.HasPrefix(line, "export ") || strings.HasPrefix(line, "unset ") {
			if !strings.Contains(string(readme), "\n"+line) {
				t.Errorf("README.md does not show make local's line %q", strings.TrimSpace(line))
			}
		}
	}
}

// readExports reads the printed lines up to the unset line and returns the
// exported variables (trailing comments dropped) and the unset ones.
func readExports(t *testing.T, r *bufio.Reader) (map[string]string, []string) {
	t.Helper()
	exports := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("make local stopped printing before its unset line (%v); exports so far: %v", err, exports)
		}
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "unset "); ok {
			return exports, strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(line, "export "); ok {
			v, _, _ = strings.Cut(v, "#")
			k, v, _ := strings.Cut(strings.TrimSpace(v), "=")
			exports[k] = v
		}
	}
}

// runCLI runs the CLI with exactly env and returns its stdout; it fails the
// test unless the CLI exits 0.
func runCLI(t *testing.T, cli string, env []string, args ...string) string {
	t.Helper()
	c := exec.CommandContext(t.Context(), cli, args...)
	c.Env = env
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("s3lock %s with the printed exports: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// waitExit waits for cmd to exit, at most limit, and returns its error.
func waitExit(cmd *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		return errors.New("still running after " + limit.String())
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
