package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfhttp"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The backend commands, with commands that stand in for Terraform: the
// shell, and this test binary speaking the http backend's requests
// (asTerraform). lab/e2e runs them under the real CLIs.

// envAsTerraform makes this test binary act as a Terraform process of the
// http backend (see asTerraform): its value says what it does.
const envAsTerraform = "S3LOCK_TEST_AS_TERRAFORM"

// asTerraform, when envAsTerraform is set, sends the requests Terraform's
// http backend sends, from the TF_HTTP_* variables, and exits: "lock-write-
// and-die" locks, writes a state under the lock and exits without
// unlocking, as a Terraform that was SIGKILLed.
func asTerraform() {
	mode := os.Getenv(envAsTerraform)
	if mode == "" {
		return
	}
	do := func(method, url string, body []byte) int {
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(90)
		}
		req.SetBasicAuth(os.Getenv(tfhttp.EnvUsername), os.Getenv(tfhttp.EnvPassword))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(91)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	switch mode {
	case "count-sigterm":
		// Records each SIGTERM in the file $S3LOCK_TEST_RECORD, as a
		// Terraform that stops gracefully on the first and at once on a
		// second would see them.
		record := os.Getenv("S3LOCK_TEST_RECORD")
		sigs := make(chan os.Signal, 8)
		signal.Notify(sigs, syscall.SIGTERM)
		_ = os.WriteFile(record, []byte("ready\n"), 0o644)
		deadline := time.After(processLimit)
		for {
			select {
			case <-sigs:
				f, _ := os.OpenFile(record, os.O_APPEND|os.O_WRONLY, 0)
				_, _ = f.WriteString("TERM\n")
				_ = f.Close()
			case <-deadline:
				os.Exit(0)
			}
		}
	case "lock-write-and-die":
		info := tfstate.LockInfo{ID: "tf-lock-1", Operation: "OperationTypeApply", Who: "test@host"}
		if s := do(os.Getenv(tfhttp.EnvLockMethod), os.Getenv(tfhttp.EnvLockAddress), info.JSON()); s != http.StatusOK {
			fmt.Fprintln(os.Stderr, "LOCK:", s)
			os.Exit(92)
		}
		if s := do(os.Getenv(tfhttp.EnvUpdateMethod), os.Getenv(tfhttp.EnvAddress)+"?ID=tf-lock-1", []byte(`{"version":4,"serial":1}`)); s != http.StatusOK {
			fmt.Fprintln(os.Stderr, "POST:", s)
			os.Exit(93)
		}
		os.Exit(0) // no UNLOCK
	}
	fmt.Fprintln(os.Stderr, "unknown", envAsTerraform, mode)
	os.Exit(94)
}

// backend run gives its command the http backend's settings, takes
// TF_WORKSPACE as the workspace, and exits with the command's code.
func TestBackendRun_GivesItsCommandTheBackendsSettings(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	key := c.name("app/terraform.tfstate")
	env := append(slices.Clone(c.env), "TF_WORKSPACE=dev", tfhttp.EnvAddress+"=http://elsewhere/", tfhttp.EnvLockMethod+"=PUT",
		envSSECKey+"=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", envToken+"={}")
	r := c.runWith(env, "", "backend", "run", "--key", key, "--", "sh", "-c", "env; exit 7")
	if r.code != 7 {
		t.Fatalf("backend run of a command that exits 7: %s; want exit 7", r)
	}
	got := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	addr := got[tfhttp.EnvAddress]
	if !strings.HasPrefix(addr, "http://127.0.0.1:") || !strings.HasSuffix(addr, "/state/env:/dev/"+key) {
		t.Errorf("%s=%q; want the state of workspace dev (env:/dev/%s) on 127.0.0.1", tfhttp.EnvAddress, addr, key)
	}
	for _, name := range []string{tfhttp.EnvLockAddress, tfhttp.EnvUnlockAddress} {
		if got[name] != addr {
			t.Errorf("%s=%q; want %q", name, got[name], addr)
		}
	}
	if got[tfhttp.EnvLockMethod] != "LOCK" || got[tfhttp.EnvUnlockMethod] != "UNLOCK" || len(got[tfhttp.EnvPassword]) < 32 || got[tfhttp.EnvUsername] == "" {
		t.Errorf("the methods and credentials are %q %q %q %q", got[tfhttp.EnvLockMethod], got[tfhttp.EnvUnlockMethod], got[tfhttp.EnvUsername], got[tfhttp.EnvPassword])
	}
	if _, ok := got["TF_WORKSPACE"]; ok {
		t.Error("TF_WORKSPACE reached the command: the http backend has no workspaces, Terraform would refuse it")
	}
	for _, secret := range []string{envSSECKey, envToken} {
		if _, ok := got[secret]; ok {
			t.Errorf("%s reached the command", secret)
		}
	}
}

// A Terraform that dies holding the lock (no unlock) leaves it free the
// moment its backend run exits, its state written.
func TestBackendRun_FreesTheLockOfACommandThatDiedHoldingIt(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	key := c.name("app/terraform.tfstate")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(c.env, envAsTerraform+"=lock-write-and-die")
	r := c.runWith(env, "", "backend", "run", "--key", key, "--", self)
	if r.code != 0 {
		t.Fatalf("backend run: %s", r)
	}
	st := c.current(key + tfstate.LockSuffix)
	if st.Phase() != s3lock.PhaseReleased || st.Epoch != 1 {
		t.Errorf("after the command died holding the lock, the lock is %s at epoch %d; want epoch 1 released", st.Phase(), st.Epoch)
	}
	if !strings.Contains(r.stderr, "released the state lock") {
		t.Errorf("the release was not reported: %s", r.stderr)
	}
	if keys := c.keys(key + tfstate.LockFileSuffix); len(keys) != 0 {
		t.Errorf("the s3 backend's lock file is left: %v", keys)
	}
}

// keys lists the objects at key exactly.
func (c *cli) keys(key string) []string {
	c.t.Helper()
	var out []string
	for _, k := range s3test.Keys(c.t, c.ns.Client, c.ns.Bucket, key) {
		if k == key {
			out = append(out, k)
		}
	}
	return out
}

// serve starts `backend serve` on a free loopback port, with flags, and
// returns its URL (what it prints on stdout, without the state path), the
// process and its stderr.
func (c *cli) serve(flags ...string) (string, *exec.Cmd, *testkit.Buffer) {
	c.t.Helper()
	cmd := c.command(c.t.Context(), append([]string{"backend", "serve", "--listen", "127.0.0.1:0"}, flags...)...)
	cmd.Env = append(cmd.Env, envBackendUsername+"=tf", envBackendPassword+"=0123456789abcdef")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	stderr := &testkit.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cmd.Process.Kill() })
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Scan()
		line <- s.Text()
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u := <-line:
		if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, tfhttp.StatePath) {
			c.t.Fatalf("serve printed %q; want its URL; stderr: %s", u, stderr.String())
		}
		return strings.TrimSuffix(u, tfhttp.StatePath), cmd, stderr
	case <-time.After(processLimit):
		c.t.Fatalf("serve printed no URL; stderr: %s", stderr.String())
	}
	return "", nil, nil
}

// Serve answers only requests with its credentials, serves any key of the
// bucket, and releases the locks it holds when it is stopped.
func TestBackendServe_ServesStatesToThoseWithTheCredentials(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base, cmd, stderr := c.serve()
	key := c.name("app/terraform.tfstate")
	send := func(method, user, pass string, body []byte) int {
		req, err := http.NewRequestWithContext(t.Context(), method, tfhttp.StateURL(base, key), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := send(http.MethodGet, "", "", nil); s != http.StatusUnauthorized {
		t.Errorf("GET without credentials: %d; want 401", s)
	}
	if s := send(http.MethodGet, "tf", "wrong-password-here", nil); s != http.StatusUnauthorized {
		t.Errorf("GET with a wrong password: %d; want 401", s)
	}
	if s := send(http.MethodGet, "tf", "0123456789abcdef", nil); s != http.StatusNotFound {
		t.Errorf("GET of a state that does not exist yet: %d; want 404", s)
	}
	info := tfstate.LockInfo{ID: "tf-lock-1", Operation: "OperationTypeApply", Who: "test@host"}
	if s := send(tfhttp.MethodLock, "tf", "0123456789abcdef", info.JSON()); s != http.StatusOK {
		t.Fatalf("LOCK: %d", s)
	}
	if st := c.current(key + tfstate.LockSuffix); st.Phase() != s3lock.PhaseHeld {
		t.Fatalf("after LOCK the lock is %s", st.Phase())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 0 {
		t.Errorf("serve stopped by SIGTERM exited %d; stderr: %s", code, stderr.String())
	}
	if st := c.current(key + tfstate.LockSuffix); st.Phase() != s3lock.PhaseReleased {
		t.Errorf("after serve stopped, the lock it held is %s; want released", st.Phase())
	}
}

// Plans share a state's lock through serve: two plans' LOCKs are granted at
// once; an apply's LOCK with --wait 0 answers 423 (Terraform's -lock-timeout
// retries it) until both plans UNLOCK; a POST under a plan's lock is
// refused.
func TestBackendServe_PlansShareTheLockAndAnApplyWaitsForThem(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base, cmd, stderr := c.serve("--wait", "0")
	key := c.name("app/terraform.tfstate")
	send := func(method, query string, body []byte) int {
		u := tfhttp.StateURL(base, key)
		if query != "" {
			u += "?" + query
		}
		req, err := http.NewRequestWithContext(t.Context(), method, u, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("tf", "0123456789abcdef")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	lock := func(id, operation string) int {
		return send(tfhttp.MethodLock, "", tfstate.LockInfo{ID: id, Operation: operation, Who: "test@host"}.JSON())
	}
	unlock := func(id string) int { return send(tfhttp.MethodUnlock, "", tfstate.LockInfo{ID: id}.JSON()) }
	for _, id := range []string{"plan-1", "plan-2"} {
		if s := lock(id, tfstate.OperationPlan); s != http.StatusOK {
			t.Fatalf("%s's LOCK: %d; want 200 (plans share the lock); stderr: %s", id, s, stderr.String())
		}
	}
	if s := send(http.MethodPost, "ID=plan-1", []byte(`{"version": 4, "serial": 1}`)); s != http.StatusConflict {
		t.Errorf("POST under a plan's lock: %d; want 409", s)
	}
	if got := c.keys(key); len(got) != 0 {
		t.Errorf("a plan's lock, or a write under it, wrote the state: %v", got)
	}
	for _, plan := range []string{"plan-1", "plan-2"} {
		if s := lock("apply", "OperationTypeApply"); s != http.StatusLocked {
			t.Fatalf("an apply's LOCK while plans hold the state: %d; want 423", s)
		}
		if s := unlock(plan); s != http.StatusOK {
			t.Fatalf("%s's UNLOCK: %d", plan, s)
		}
	}
	if s := lock("apply", "OperationTypeApply"); s != http.StatusOK {
		t.Fatalf("an apply's LOCK once the plans unlocked: %d; stderr: %s", s, stderr.String())
	}
	if s := unlock("apply"); s != http.StatusOK {
		t.Fatal(s)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 0 {
		t.Errorf("serve stopped by SIGTERM exited %d; stderr: %s", code, stderr.String())
	}
}

// A port in use is a clear error at once.
func TestBackendServe_APortInUse(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env := append(c.env, envBackendUsername+"=tf", envBackendPassword+"=0123456789abcdef")
	r := c.runWith(env, "", "backend", "serve", "--listen", l.Addr().String())
	if r.code != exitError || !strings.Contains(r.stderr, "address already in use") || !strings.Contains(r.stderr, "--listen") {
		t.Errorf("serve on a port in use: %s; want exit 1 naming the address and --listen", r)
	}
}

func TestForceUnlockID_ReadsTheIDOfAForceUnlockCommandLine(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"terraform", "force-unlock", "17"}, "17"},
		{[]string{"terraform", "-chdir=infra", "force-unlock", "-force", "17"}, "17"},
		{[]string{"tofu", "force-unlock", "-force=true", "9"}, "9"},
		{[]string{"terragrunt", "force-unlock", "--", "5"}, "5"},
		{[]string{"terraform", "apply", "-auto-approve"}, ""},
		{[]string{"sh", "-c", "terraform force-unlock 3"}, ""},
	} {
		if got := forceUnlockID(tc.argv); got != tc.want {
			t.Errorf("forceUnlockID(%q) = %q; want %q", tc.argv, got, tc.want)
		}
	}
}

// A run of a command that reads or writes the state but never reached the
// backend (its configuration uses another) is pointed out.
func TestBackendRun_NotesACommandThatNeverUsedTheBackend(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("backend", "run", "--key", c.name("app/terraform.tfstate"), "--", "sh", "-c", ":", "apply")
	if r.code != 0 || !strings.Contains(r.stderr, `backend "http" {}`) {
		t.Errorf("backend run of an apply that made no request: %s; want a note naming backend \"http\" {}", r)
	}
}
