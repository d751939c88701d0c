package e2e_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The environment of the tests of `s3lock backend run` and `s3lock backend
// serve` (backend_test.go): the s3lock CLI, built once for the test binary,
// serving Terraform's http backend to the CLI under test for a state in the
// local server, and Terraform's s3 backend on the same state.

// httpBackend is the backend block of every configuration served by s3lock:
// its settings come from the TF_HTTP_* variables.
const httpBackend = "terraform {\n  backend \"http\" {}\n}\n"

// The s3lock CLI, built once for the test binary into the harness's
// directory.
var s3lockBuild struct {
	once sync.Once
	path string
	err  error
}

func s3lockCLI(t *testing.T, h *tfharness.Harness) string {
	t.Helper()
	s3lockBuild.once.Do(func() {
		s3lockBuild.path = filepath.Join(harnessDir, "s3lock")
		s3lockBuild.err = tfharness.Build(context.Background(), h.RepoRoot, "./cmd/s3lock", s3lockBuild.path)
	})
	if s3lockBuild.err != nil {
		t.Fatal(s3lockBuild.err)
	}
	return s3lockBuild.path
}

// backendEnv is one test's state: a namespace, the state's key, the CLI.
type backendEnv struct {
	t   *testing.T
	h   *tfharness.Harness
	ns  *s3test.Namespace
	key string
	cli string
	sdk *s3lock.Client
}

func newBackendEnv(t *testing.T) *backendEnv {
	t.Helper()
	h := setup(t)
	ns := s3test.New(t)
	if !ns.Target.Local {
		t.Skip("needs the local server (static credentials for terraform and the CLI)")
	}
	sdk, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return &backendEnv{t: t, h: h, ns: ns, key: ns.Name("app/terraform.tfstate"), cli: s3lockCLI(t, h), sdk: sdk}
}

// lockName is the s3lock lock of the state; lockFile the s3 backend's.
func (e *backendEnv) lockName() string { return e.key + ".s3lock" }
func (e *backendEnv) lockFile() string { return e.key + ".tflock" }

// s3lockEnv is the connection settings of the s3lock CLI.
func (e *backendEnv) s3lockEnv() []string {
	tg := e.ns.Target
	return []string{"S3LOCK_BUCKET=" + e.ns.Bucket, "S3LOCK_ENDPOINT=" + tg.Endpoint, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID=" + tg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + tg.SecretKey, "AWS_REGION=" + tg.Region,
		"AWS_EC2_METADATA_DISABLED=true"}
}

// tf is the command line of the CLI under test with args, without colour.
func (e *backendEnv) tf(args ...string) []string {
	return append(append([]string{e.h.Terraform}, args...), "-no-color")
}

// s3lock is the s3lock CLI with args in dir, with the connection settings
// and the CLI configuration of the harness (which backend run passes on to
// its command). When ctx ends, s3lock gets an interrupt.
func (e *backendEnv) s3lock(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := e.h.Command(ctx, dir)
	cmd.Path, cmd.Args = e.cli, append([]string{e.cli}, args...)
	cmd.Env = append(cmd.Env, e.s3lockEnv()...)
	return cmd
}

// backendRun is `s3lock backend run --key KEY flags -- argv` in dir.
func (e *backendEnv) backendRun(ctx context.Context, dir string, flags []string, argv ...string) *exec.Cmd {
	return e.s3lock(ctx, dir, append(append(append([]string{"backend", "run", "--key", e.key}, flags...), "--"), argv...)...)
}

// through runs argv through `s3lock backend run` in dir and returns its
// output; it fails the test if the run fails.
func (e *backendEnv) through(dir string, flags []string, argv ...string) string {
	e.t.Helper()
	out, err := e.backendRun(e.t.Context(), dir, flags, argv...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("s3lock backend run %v -- %v: %v\n%s", flags, argv[1:], err, out)
	}
	return string(out)
}

// module writes main.tf into a fresh directory for who and initializes
// it through `s3lock backend run` (init reads the state).
func (e *backendEnv) module(who, mainTF string) string {
	e.t.Helper()
	dir := e.dir(who, mainTF)
	e.through(dir, nil, e.tf("init", "-input=false")...)
	return dir
}

// clone is a copy of the initialized directory of another module, for
// who, with main.tf: an init the test need not run again.
func (e *backendEnv) clone(dir, who, mainTF string) string {
	e.t.Helper()
	dst := filepath.Join(e.t.TempDir(), who)
	if err := tfharness.CopyDir(dst, dir); err != nil {
		e.t.Fatal(err)
	}
	writeMainTF(e.t, dst, mainTF)
	return dst
}

// dir is a fresh directory for who with main.tf.
func (e *backendEnv) dir(who, mainTF string) string {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), who)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	writeMainTF(e.t, dir, mainTF)
	return dir
}

// writeMainTF writes the root module in dir.
func writeMainTF(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// s3Backend is the s3 backend of the state at key, with its lock file.
func (e *backendEnv) s3Backend(key string) string {
	return "terraform {\n  backend \"s3\" {\n" + e.s3Settings(key, "    ", " = ") + "    use_lockfile = true\n  }\n}\n"
}

// s3Settings are the s3 backend's settings for the state at key, one a
// line: the backend block's, or terraform_remote_state's config.
func (e *backendEnv) s3Settings(key, indent, assign string) string {
	tg := e.ns.Target
	var b strings.Builder
	for _, kv := range [][2]string{
		{"bucket", strconv.Quote(e.ns.Bucket)}, {"key", strconv.Quote(key)}, {"region", strconv.Quote(tg.Region)},
		{"access_key", strconv.Quote(tg.AccessKey)}, {"secret_key", strconv.Quote(tg.SecretKey)},
		{"endpoints", "{ s3 = " + strconv.Quote(tg.Endpoint) + " }"}, {"use_path_style", "true"},
		{"skip_credentials_validation", "true"}, {"skip_requesting_account_id", "true"},
		{"skip_region_validation", "true"}, {"skip_metadata_api_check", "true"},
	} {
		b.WriteString(indent + kv[0] + assign + kv[1] + "\n")
	}
	return b.String()
}

// s3Terraform is a harness for a Terraform with the s3 backend and its lock
// file (1.10 or later) on PATH — the CLI under test's pinned builds lack the
// s3 backend — or nil if there is none.
func (e *backendEnv) s3Terraform() *tfharness.Harness {
	e.t.Helper()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		return nil
	}
	cli, err := tfharness.Detect(e.t.Context(), tf)
	if err != nil {
		e.t.Fatal(err)
	}
	if cli.IsOpenTofu() || cli.Lacks(tfharness.Feature{Name: "the s3 backend's use_lockfile", Terraform: "1.10.0"}) != "" {
		return nil
	}
	h := *e.h
	h.Terraform, h.CLI, h.Env = tf, cli, nil
	return &h
}

// runCLI runs the CLI of h in dir and fails the test if it fails.
func runCLI(t *testing.T, h *tfharness.Harness, dir string, args ...string) string {
	t.Helper()
	out, err := h.Run(t.Context(), dir, append(args, "-no-color")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// tfState is what the tests read of a state object.
type tfState struct {
	Serial  int `json:"serial"`
	Outputs map[string]struct {
		Value json.RawMessage `json:"value"`
	} `json:"outputs"`
	Resources []struct {
		Mode string `json:"mode"`
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"resources"`
}

// managed lists the state's managed resources, sorted.
func (s tfState) managed() []string {
	var out []string
	for _, r := range s.Resources {
		if r.Mode == "managed" {
			out = append(out, r.Type+"."+r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// output is the JSON of an output's value ("" if there is none).
func (s tfState) output(name string) string { return string(s.Outputs[name].Value) }

// readState reads the state object at key from the bucket, as any backend
// would.
func (e *backendEnv) readState(key string) tfState {
	e.t.Helper()
	obj, err := e.ns.Client.GetObject(e.t.Context(), &s3.GetObjectInput{Bucket: aws.String(e.ns.Bucket), Key: aws.String(key)})
	if err != nil {
		e.t.Fatalf("reading the state s3://%s/%s: %v", e.ns.Bucket, key, err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	var st tfState
	if err := json.Unmarshal(b, &st); err != nil {
		e.t.Fatalf("the state s3://%s/%s is not a state: %v\n%s", e.ns.Bucket, key, err, b)
	}
	return st
}

// seedState writes an empty state (no resources, no outputs) at key, as
// any backend would.
func (e *backendEnv) seedState(key string) {
	e.t.Helper()
	const empty = `{"version":4,"terraform_version":"1.10.0","serial":1,"lineage":"8d6c2a8e-0b1f-4b7e-9a55-2f1d3c4b5a69","outputs":{},"resources":[]}`
	if _, err := e.ns.Client.PutObject(e.t.Context(), &s3.PutObjectInput{Bucket: aws.String(e.ns.Bucket), Key: aws.String(key),
		Body: strings.NewReader(empty)}); err != nil {
		e.t.Fatalf("writing an empty state at s3://%s/%s: %v", e.ns.Bucket, key, err)
	}
}

// wantState fails the test unless the state object at key holds exactly
// the managed resources named.
func (e *backendEnv) wantState(key string, want ...string) tfState {
	e.t.Helper()
	st := e.readState(key)
	slices.Sort(want)
	if got := st.managed(); !slices.Equal(got, want) {
		e.t.Fatalf("the state s3://%s/%s holds %v; want %v", e.ns.Bucket, key, got, want)
	}
	return st
}

// exists reports whether the object at key exists.
func (e *backendEnv) exists(key string) bool {
	e.t.Helper()
	_, err := e.ns.Client.HeadObject(e.t.Context(), &s3.HeadObjectInput{Bucket: aws.String(e.ns.Bucket), Key: aws.String(key)})
	var nf *types.NotFound
	switch {
	case err == nil:
		return true
	case errors.As(err, &nf):
		return false
	}
	e.t.Fatalf("HEAD s3://%s/%s: %v", e.ns.Bucket, key, err)
	return false
}

// wantFree fails the test unless the state's lock is free (released or
// lapsed, as phase says; "" for either) and the s3 backend's lock file is
// gone; it returns the lock's state.
func (e *backendEnv) wantFree(phase s3lock.Phase) s3lock.State {
	e.t.Helper()
	st, err := e.sdk.Current(e.t.Context(), e.lockName())
	switch {
	case err != nil:
		e.t.Fatal(err)
	case st.Phase() == s3lock.PhaseHeld || (phase != "" && st.Phase() != phase):
		e.t.Errorf("the state's lock is %s (%+v); want it %s", st.Phase(), st, cmp.Or(string(phase), "free"))
	}
	if e.exists(e.lockFile()) {
		e.t.Errorf("the s3 backend's lock file s3://%s/%s is still there", e.ns.Bucket, e.lockFile())
	}
	return st
}

// groupProcess is a command started in a process group of its own, its output
// going to a file (so that waiting for it never waits for a process it
// left behind holding a pipe).
type groupProcess struct {
	t   *testing.T
	cmd *exec.Cmd
	out string
}

// startInGroup starts cmd in a process group of its own; the test's cleanup kills
// the group.
func startInGroup(t *testing.T, cmd *exec.Cmd) *groupProcess {
	t.Helper()
	out := filepath.Join(t.TempDir(), "output")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return &groupProcess{t: t, cmd: cmd, out: out}
}

// output is what the process has printed so far.
func (p *groupProcess) output() string {
	p.t.Helper()
	b, err := os.ReadFile(p.out)
	if err != nil {
		p.t.Fatal(err)
	}
	return string(b)
}

// child returns the pid of s3lock's command: the process's only child,
// or, when that is s3lock's relay (outside a terminal, on Linux: `s3lock
// __relay -- CMD`), the relay's child. The test's cleanup kills its
// process group too.
func (p *groupProcess) child() int {
	p.t.Helper()
	pid := childOf(p.cmd.Process.Pid)
	if pid == 0 {
		p.t.Fatalf("process %d (%s) has no child", p.cmd.Process.Pid, p.cmd.Args[0])
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), "\x00__relay\x00") {
		relay := pid
		testkit.Eventually(p.t, waitLimit, "the relay to start the command", func() bool { pid = childOf(relay); return pid != 0 })
	}
	if pgid, err := syscall.Getpgid(pid); err == nil {
		p.t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	}
	return pid
}

// childOf returns the pid of a live child of parent; 0 if it has none.
func childOf(parent int) int {
	procs, _ := os.ReadDir("/proc")
	for _, d := range procs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if ppid, ok := procParent(n); ok && ppid == parent {
			return n
		}
	}
	return 0
}

// procParent is the parent's pid of a live (not zombie) process.
func procParent(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...: comm may hold anything but ends at the
	// last ')'.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 2 || fields[0] == "Z" {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// procAlive reports whether a process runs (exists and is not a zombie).
func procAlive(pid int) bool {
	_, ok := procParent(pid)
	return ok
}

// exitCodeOf is a finished command's exit code (-1 if a signal killed it).
func exitCodeOf(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// wait waits for the process to exit, at most limit (a bound against a
// hang, not a timing assertion), and returns how it exited.
func (p *groupProcess) wait(limit time.Duration) error {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		p.t.Fatalf("%s still runs %s later; output:\n%s", p.cmd.Args[0], limit, p.output())
		return nil
	}
}

// signalGroups sends sig to the process groups of pids.
func signalGroups(t *testing.T, sig syscall.Signal, pids ...int) {
	t.Helper()
	var groups []int
	for _, pid := range pids {
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			t.Fatalf("the process group of %d: %v", pid, err)
		}
		if !slices.Contains(groups, pgid) {
			groups = append(groups, pgid)
		}
	}
	for _, pgid := range groups {
		if err := syscall.Kill(-pgid, sig); err != nil {
			t.Fatalf("kill -%d -%d: %v", sig, pgid, err)
		}
	}
}

// oneLine is text with its runs of white space made one space: Terraform
// wraps its messages.
func oneLine(text string) string { return strings.Join(strings.Fields(text), " ") }
