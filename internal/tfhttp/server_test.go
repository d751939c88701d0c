package tfhttp_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfhttp"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

func TestMain(m *testing.M) {
	code := s3test.Main(m)
	if code == 0 {
		// Every lock's lease, and the server's waits, must be gone once
		// the servers shut down; idle HTTP connections may remain.
		if err := s3test.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Terraform's http backend, as the requests Terraform and OpenTofu send
// (internal/backend/remote-state/http/client.go in both), against the
// server over the local S3 store.

var creds = tfhttp.Credentials{Username: "tf", Password: "0123456789abcdef0123"}

// backend is one test's server, its S3 namespace and a log of what it
// told the user.
type backend struct {
	t   *testing.T
	ns  *s3test.Namespace
	srv *tfhttp.Server
	url string // of the server

	mu  sync.Mutex
	log []string
}

func newBackend(t *testing.T, tweak func(*tfhttp.Config)) *backend {
	t.Helper()
	ns := s3test.New(t)
	b := &backend{t: t, ns: ns}
	cfg := tfhttp.Config{
		API:         ns.Client,
		NewClient:   func() (*s3lock.Client, error) { return s3lock.New(ns.Client, ns.Bucket) },
		State:       tfstate.Config{Bucket: ns.Bucket, Order: s3lock.OrderFIFO},
		Credentials: creds,
		Log:         func(msg string) { b.mu.Lock(); b.log = append(b.log, msg); b.mu.Unlock() },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := tfhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Shutdown(context.Background())
	})
	b.srv, b.url = srv, hs.URL
	return b
}

// key is the test's state key.
func (b *backend) key() string { return b.ns.Name("app/terraform.tfstate") }

// logged is everything the server told the user, one line each.
func (b *backend) logged() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.log, "\n")
}

// do sends a request as Terraform's http backend does, and returns the
// status and body of the answer.
func (b *backend) do(method, query string, body []byte) (int, []byte) {
	b.t.Helper()
	return b.doAs(creds, method, b.key(), query, body)
}

func (b *backend) doAs(c tfhttp.Credentials, method, key, query string, body []byte) (int, []byte) {
	b.t.Helper()
	u := tfhttp.StateURL(b.url, key)
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, u, bytes.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if c.Username != "" {
		req.SetBasicAuth(c.Username, c.Password)
	}
	if body != nil {
		sum := md5.Sum(body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// lock is a LOCK with Terraform's lock info of an apply for id; it returns
// the status and the lock info answered.
func (b *backend) lock(id string) (int, tfstate.LockInfo) {
	b.t.Helper()
	return b.lockFor(id, "OperationTypeApply")
}

// lockFor is lock for Terraform's operation (its lock info's Operation).
func (b *backend) lockFor(id, operation string) (int, tfstate.LockInfo) {
	b.t.Helper()
	info := tfstate.LockInfo{ID: id, Operation: operation, Who: "alice@laptop", Version: "1.11.4", Created: time.Now()}
	status, body := b.do(tfhttp.MethodLock, "", info.JSON())
	var got tfstate.LockInfo
	if status == http.StatusOK || status == http.StatusLocked {
		if err := json.Unmarshal(body, &got); err != nil {
			b.t.Fatalf("LOCK answered %d with %q: %v", status, body, err)
		}
	}
	return status, got
}

func (b *backend) unlock(id string) int {
	b.t.Helper()
	status, _ := b.do(tfhttp.MethodUnlock, "", tfstate.LockInfo{ID: id}.JSON())
	return status
}

// current is the state lock as the SDK sees it.
func (b *backend) current() s3lock.State {
	b.t.Helper()
	c, err := s3lock.New(b.ns.Client, b.ns.Bucket)
	if err != nil {
		b.t.Fatal(err)
	}
	st, err := c.Current(b.t.Context(), b.key()+tfstate.LockSuffix)
	if err != nil {
		b.t.Fatal(err)
	}
	return st
}

// stored is the state object's bytes, nil if there is none.
func (b *backend) stored() []byte {
	b.t.Helper()
	out, err := b.ns.Client.GetObject(b.t.Context(), &s3.GetObjectInput{Bucket: aws.String(b.ns.Bucket), Key: aws.String(b.key())})
	if err != nil {
		return nil
	}
	defer out.Body.Close()
	body, _ := io.ReadAll(out.Body)
	return body
}

func state(serial string) []byte {
	return []byte("{\n  \"version\": 4,\n  \"serial\": " + serial + ",\n  \"lineage\": \"l\",\n  \"resources\": []\n}\n")
}

func TestServer_EveryRequestNeedsTheCredentials(t *testing.T) {
	b := newBackend(t, nil)
	for _, c := range []tfhttp.Credentials{{}, {Username: "tf", Password: "wrong"}, {Username: "other", Password: creds.Password}} {
		for _, method := range []string{http.MethodGet, http.MethodPost, tfhttp.MethodLock, tfhttp.MethodUnlock} {
			if status, _ := b.doAs(c, method, b.key(), "", []byte("{}")); status != http.StatusUnauthorized {
				t.Errorf("%s as %q: %d; want 401", method, c.Username, status)
			}
		}
	}
	if b.stored() != nil || b.current().Epoch != 0 {
		t.Error("a request without the credentials reached the store")
	}
}

// A run's life: the lock, reads and writes under it, the unlock.
func TestServer_LockReadWriteUnlock(t *testing.T) {
	b := newBackend(t, nil)
	if status, _ := b.do(http.MethodGet, "", nil); status != http.StatusNotFound {
		t.Errorf("GET of a state that does not exist: %d; want 404 (no state)", status)
	}
	status, _ := b.lock("tf-uuid-1")
	if status != http.StatusOK {
		t.Fatalf("LOCK of a free state: %d; want 200", status)
	}
	st := b.current()
	if st.Phase() != s3lock.PhaseHeld || st.Metadata[tfstate.MetaWho] != "alice@laptop" {
		t.Fatalf("after LOCK the state lock is %+v; want it held, for alice@laptop", st)
	}
	if status, _ := b.do(http.MethodGet, "", nil); status != http.StatusNotFound {
		t.Errorf("GET of a state only sealed (a placeholder): %d; want 404", status)
	}
	if status, body := b.do(http.MethodPost, "ID=tf-uuid-1", state("1")); status != http.StatusOK {
		t.Fatalf("POST under the lock: %d %s", status, body)
	}
	if status, body := b.do(http.MethodGet, "", nil); status != http.StatusOK || !bytes.Equal(body, state("1")) {
		t.Errorf("GET after the write: %d %q; want the state written", status, body)
	}
	if stored := b.stored(); !bytes.HasPrefix(stored, bytes.TrimRight(state("1"), "\n")) || bytes.Equal(stored, state("1")) {
		t.Errorf("the state object is %q; want the state with its fence mark", stored)
	}
	if status, _ := b.do(tfhttp.MethodLock, "", tfstate.LockInfo{ID: "tf-uuid-1", Operation: "OperationTypeApply"}.JSON()); status != http.StatusOK {
		t.Errorf("a retried LOCK of the lock ID granted: %d; want 200", status)
	}
	if status := b.unlock("tf-uuid-1"); status != http.StatusOK {
		t.Fatalf("UNLOCK: %d", status)
	}
	if st := b.current(); st.Phase() != s3lock.PhaseReleased {
		t.Errorf("after UNLOCK the state lock is %s; want released", st.Phase())
	}
	if status, body := b.do(http.MethodPost, "ID=tf-uuid-1", state("2")); status != http.StatusConflict {
		t.Errorf("POST under a lock unlocked since: %d %s; want 409", status, body)
	}
	if got := b.stored(); !bytes.HasPrefix(got, bytes.TrimRight(state("1"), "\n")) {
		t.Errorf("the state object is %q; want the write made under the lock", got)
	}
}

// A lock found held answers 423 with the holder's lock info: its lock ID
// is the lease's epoch, which force-unlock takes.
func TestServer_AHeldLockAnswers423WithItsHolder(t *testing.T) {
	b := newBackend(t, nil)
	if status, _ := b.lock("first"); status != http.StatusOK {
		t.Fatal(status)
	}
	epoch := tfstate.LockID(b.current().Epoch)
	status, holder := b.lock("second")
	if status != http.StatusLocked || holder.ID != epoch || holder.Who != "alice@laptop" || holder.Operation != "OperationTypeApply" {
		t.Fatalf("LOCK of a held state: %d %+v; want 423 with lock ID %s, alice@laptop's apply", status, holder, epoch)
	}
	if !strings.Contains(b.logged(), "terraform force-unlock "+epoch) {
		t.Errorf("the user was not told how to force-unlock: %s", b.logged())
	}
	if status, _ := b.do(http.MethodPost, "ID=second", state("9")); status != http.StatusConflict {
		t.Errorf("POST under a lock ID that was refused: %d; want 409", status)
	}
	if status, _ := b.do(http.MethodPost, "", state("9")); status != http.StatusLocked {
		t.Errorf("POST without a lock (-lock=false) while the state is locked: %d; want 423", status)
	}
	if b.stored() != nil && bytes.Contains(b.stored(), []byte(`"serial": 9`)) {
		t.Error("a refused write landed")
	}
}

// A waiting LOCK gets the lock when its holder unlocks.
func TestServer_ALockWaitsInLine(t *testing.T) {
	b := newBackend(t, func(c *tfhttp.Config) { c.State.Wait = time.Minute })
	if status, _ := b.lock("first"); status != http.StatusOK {
		t.Fatal(status)
	}
	got := make(chan int, 1)
	go func() { status, _ := b.lock("second"); got <- status }()
	testkit.Eventually(t, 30*time.Second, "the second LOCK to queue", func() bool { return b.current().Waiters == 1 })
	if status := b.unlock("first"); status != http.StatusOK {
		t.Fatal(status)
	}
	if status := <-got; status != http.StatusOK {
		t.Fatalf("the waiting LOCK: %d; want 200 once the first unlocked", status)
	}
	if status := b.unlock("second"); status != http.StatusOK {
		t.Fatal(status)
	}
}

// Plans lock the state shared: two plans' LOCKs are granted at once, each
// under its own s3lock lock ID; a POST under a plan's lock is refused (409)
// and writes nothing; an apply's LOCK waits until both plans UNLOCK, and
// then writes.
func TestServer_PlansShareAndAnApplyWaitsForThem(t *testing.T) {
	b := newBackend(t, func(c *tfhttp.Config) { c.State.Wait = time.Minute })
	if status, _ := b.lock("first-apply"); status != http.StatusOK {
		t.Fatal(status)
	}
	if status, _ := b.do(http.MethodPost, "ID=first-apply", state("1")); status != http.StatusOK {
		t.Fatal(status)
	}
	if status := b.unlock("first-apply"); status != http.StatusOK {
		t.Fatal(status)
	}
	before := b.stored()
	for _, id := range []string{"plan-1", "plan-2"} {
		if status, _ := b.lockFor(id, tfstate.OperationPlan); status != http.StatusOK {
			t.Fatalf("%s's LOCK: %d; want 200 (plans share the lock)", id, status)
		}
	}
	if st := b.current(); !st.Shared || len(st.Holders) != 2 {
		t.Fatalf("the lock while two plans hold it: shared %v, %d holders; want both plans", st.Shared, len(st.Holders))
	}
	if status, body := b.do(http.MethodGet, "", nil); status != http.StatusOK || !bytes.Equal(body, state("1")) {
		t.Errorf("a plan's GET: %d %q; want the state", status, body)
	}
	if status, _ := b.do(http.MethodPost, "ID=plan-1", state("99")); status != http.StatusConflict {
		t.Errorf("POST under a plan's lock: %d; want 409", status)
	}
	if !bytes.Equal(b.stored(), before) {
		t.Fatal("a plan's lock, or a write under it, changed the state object")
	}
	if !strings.Contains(b.logged(), "a plan does not write the state") {
		t.Errorf("the refusal does not say why: %s", b.logged())
	}
	got := make(chan int, 1)
	go func() { status, _ := b.lock("apply"); got <- status }()
	testkit.Eventually(t, 30*time.Second, "the apply to wait for the plans", func() bool { return b.current().Pending })
	if status := b.unlock("plan-1"); status != http.StatusOK {
		t.Fatal(status)
	}
	if st := b.current(); len(st.Holders) != 1 || st.Holders[0].Metadata[tfstate.MetaOperation] != tfstate.OperationPlan {
		t.Fatalf("after one plan's UNLOCK: holders %+v; want the other plan", st.Holders)
	}
	select {
	case status := <-got:
		t.Fatalf("the apply's LOCK answered %d while a plan holds the state", status)
	default:
	}
	if status := b.unlock("plan-2"); status != http.StatusOK {
		t.Fatal(status)
	}
	if status := <-got; status != http.StatusOK {
		t.Fatalf("the apply's LOCK once the plans unlocked: %d", status)
	}
	if status, body := b.do(http.MethodPost, "ID=apply", state("2")); status != http.StatusOK {
		t.Fatalf("the apply's POST: %d %s", status, body)
	}
	if status := b.unlock("apply"); status != http.StatusOK {
		t.Fatal(status)
	}
}

// An apply whose wait for the plans runs out answers 423 with a plan's lock
// info (Terraform's -lock-timeout then tries again), whose ID is that
// plan's lock ID, and the plans keep the lock.
func TestServer_AnApplyWhoseWaitForPlansRunsOutAnswers423(t *testing.T) {
	b := newBackend(t, func(c *tfhttp.Config) { c.State.Wait = time.Second })
	if status, _ := b.lockFor("plan", tfstate.OperationPlan); status != http.StatusOK {
		t.Fatal(status)
	}
	share := b.current().Holders[0]
	status, holder := b.lock("apply")
	if id := tfstate.ShareLockID(share.Epoch, share.Share); status != http.StatusLocked || holder.ID != id ||
		holder.Operation != tfstate.OperationPlan || !strings.Contains(holder.Info, "1 plan(s)") {
		t.Fatalf("an apply's LOCK whose wait for a plan ran out: %d %+v; want 423 with the plan's lock ID %s", status, holder, id)
	}
	if st := b.current(); !st.Shared || len(st.Holders) != 1 {
		t.Errorf("after the apply gave up the lock is %+v; want the plan's still", st)
	}
	if status := b.unlock("plan"); status != http.StatusOK {
		t.Fatal(status)
	}
}

// Force-unlock: Terraform and OpenTofu send no lock ID with it, so it
// comes from the URL or the server's ForceUnlockID; only the current
// lease's ID unlocks, and the run that held it can write no more.
func TestServer_ForceUnlock(t *testing.T) {
	b := newBackend(t, nil)
	if status, _ := b.lock("stale-run"); status != http.StatusOK {
		t.Fatal(status)
	}
	epoch := tfstate.LockID(b.current().Epoch)
	if status, _ := b.do(tfhttp.MethodUnlock, "", nil); status != http.StatusConflict {
		t.Errorf("an UNLOCK with no lock ID: %d; want 409", status)
	}
	if status, _ := b.do(tfhttp.MethodUnlock, "ID=99", nil); status != http.StatusConflict {
		t.Errorf("a force-unlock of an ID that is not the lease's: %d; want 409", status)
	}
	if b.current().Phase() != s3lock.PhaseHeld {
		t.Fatal("a refused force-unlock freed the lock")
	}
	if status, _ := b.do(tfhttp.MethodUnlock, "ID="+epoch, nil); status != http.StatusOK {
		t.Fatalf("force-unlock of lock ID %s: %d", epoch, status)
	}
	if b.current().Phase() == s3lock.PhaseHeld {
		t.Fatal("the force-unlocked lock is still held")
	}
	if status, _ := b.lock("newer-run"); status != http.StatusOK {
		t.Fatal(status)
	}
	if status, _ := b.do(http.MethodPost, "ID=newer-run", state("2")); status != http.StatusOK {
		t.Fatal(status)
	}
	if status, _ := b.do(http.MethodPost, "ID=stale-run", state(`"stale"`)); status != http.StatusConflict {
		t.Errorf("the force-unlocked run's write: %d; want 409", status)
	}
	if bytes.Contains(b.stored(), []byte("stale")) {
		t.Fatal("the force-unlocked run's write landed")
	}
	if !strings.Contains(b.logged(), "errored.tfstate") {
		t.Errorf("the refusal does not say where Terraform keeps the state: %s", b.logged())
	}
	if status := b.unlock("stale-run"); status != http.StatusConflict {
		t.Errorf("the force-unlocked run's own UNLOCK: %d; want 409 (its lock was gone)", status)
	}
	if status := b.unlock("newer-run"); status != http.StatusOK {
		t.Fatal(status)
	}
}

// A lock held by another process's run: its lease is found lost by its
// holder, which is told (OnLost) and whose writes are refused.
func TestServer_ALockLostElsewhereRefusesItsWrites(t *testing.T) {
	b := newBackend(t, func(c *tfhttp.Config) { c.State.Lease = s3lock.MinLeaseDuration })
	lost := make(chan string, 1)
	b.srv.OnLost(func(state string, _ error) { lost <- state })
	if status, _ := b.lock("run"); status != http.StatusOK {
		t.Fatal(status)
	}
	c, err := s3lock.New(b.ns.Client, b.ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st := b.current()
	if err := c.ForceRelease(t.Context(), s3lock.Token{Bucket: b.ns.Bucket, Name: st.Name, Epoch: st.Epoch}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-lost:
		if got != b.key() {
			t.Errorf("OnLost for %q; want %q", got, b.key())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnLost was not called for a force-released lease")
	}
	if status, _ := b.do(http.MethodPost, "ID=run", state("1")); status != http.StatusConflict {
		t.Errorf("a write under the lost lock: %d; want 409", status)
	}
}

// Shutdown releases the locks still held: their clients are gone.
func TestServer_ShutdownReleasesHeldLocks(t *testing.T) {
	b := newBackend(t, nil)
	if status, _ := b.lock("run"); status != http.StatusOK {
		t.Fatal(status)
	}
	if err := b.srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := b.current(); st.Phase() != s3lock.PhaseReleased {
		t.Errorf("after Shutdown the state lock is %s; want released", st.Phase())
	}
}

// MaxHold releases a lock held too long (a client that vanished).
func TestServer_MaxHoldReleasesALockHeldTooLong(t *testing.T) {
	b := newBackend(t, func(c *tfhttp.Config) { c.MaxHold = 500 * time.Millisecond })
	if status, _ := b.lock("run"); status != http.StatusOK {
		t.Fatal(status)
	}
	testkit.Eventually(t, 30*time.Second, "the lock to be released", func() bool { return b.current().Phase() == s3lock.PhaseReleased })
	if status, _ := b.do(http.MethodPost, "ID=run", state("1")); status != http.StatusConflict {
		t.Errorf("a write under a lock released for --max-hold: %d; want 409", status)
	}
	if !strings.Contains(b.logged(), "max-hold") {
		t.Errorf("the release was not reported: %s", b.logged())
	}
}

func TestServer_RefusesBadRequests(t *testing.T) {
	b := newBackend(t, nil)
	for _, tc := range []struct {
		name, method, key string
		body              []byte
		header            map[string]string
		want              int
	}{
		{"a key with ..", http.MethodGet, "app/../x.tfstate", nil, nil, http.StatusBadRequest},
		{"an empty key", http.MethodGet, "", nil, nil, http.StatusBadRequest},
		{"a LOCK without lock info", tfhttp.MethodLock, "app/terraform.tfstate", []byte("not json"), nil, http.StatusBadRequest},
		{"a LOCK without an ID", tfhttp.MethodLock, "app/terraform.tfstate", []byte(`{"Operation":"x"}`), nil, http.StatusBadRequest},
		{"DELETE", http.MethodDelete, "app/terraform.tfstate", nil, nil, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body := b.doAs(creds, tc.method, b.ns.Name(tc.key), "", tc.body); status != tc.want {
				t.Errorf("%d %s; want %d", status, body, tc.want)
			}
		})
	}
	t.Run("a body that does not match its Content-MD5", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, tfhttp.StateURL(b.url, b.key()), strings.NewReader("{}"))
		req.SetBasicAuth(creds.Username, creds.Password)
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(make([]byte, 16)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || b.stored() != nil {
			t.Errorf("%d; want 400 and nothing written", resp.StatusCode)
		}
	})
	t.Run("a state outside the one served", func(t *testing.T) {
		one := newBackend(t, func(c *tfhttp.Config) { c.Key = "only/this.tfstate" })
		if status, _ := one.doAs(creds, http.MethodGet, "other.tfstate", "", nil); status != http.StatusNotFound {
			t.Errorf("%d; want 404", status)
		}
	})
}

func TestNew_RefusesAConfigurationWithoutCredentials(t *testing.T) {
	ns := s3test.New(t)
	base := tfhttp.Config{API: ns.Client, NewClient: func() (*s3lock.Client, error) { return s3lock.New(ns.Client, ns.Bucket) },
		State: tfstate.Config{Bucket: ns.Bucket}}
	for _, c := range []tfhttp.Credentials{{}, {Username: "tf"}, {Username: "a:b", Password: "p"}} {
		cfg := base
		cfg.Credentials = c
		if _, err := tfhttp.New(cfg); err == nil {
			t.Errorf("New with credentials %+v: no error", c)
		}
	}
	cfg := base
	cfg.Credentials, cfg.Key = creds, "/abs.tfstate"
	if _, err := tfhttp.New(cfg); !errors.Is(err, tfstate.ErrInvalidConfig) {
		t.Errorf("New with key /abs.tfstate: %v; want ErrInvalidConfig", err)
	}
}

func TestEnviron_PointsTerraformAtTheState(t *testing.T) {
	env := tfhttp.Environ("http://127.0.0.1:1234", "env:/dev/app/terraform.tfstate", creds)
	want := map[string]string{
		tfhttp.EnvAddress:       "http://127.0.0.1:1234/state/env:/dev/app/terraform.tfstate",
		tfhttp.EnvLockAddress:   "http://127.0.0.1:1234/state/env:/dev/app/terraform.tfstate",
		tfhttp.EnvUnlockAddress: "http://127.0.0.1:1234/state/env:/dev/app/terraform.tfstate",
		tfhttp.EnvLockMethod:    "LOCK", tfhttp.EnvUnlockMethod: "UNLOCK", tfhttp.EnvUpdateMethod: "POST",
		tfhttp.EnvUsername: creds.Username, tfhttp.EnvPassword: creds.Password,
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q; want %q", k, got[k], v)
		}
	}
	if len(env) != len(tfhttp.Names()) {
		t.Errorf("Environ sets %d variables, Names lists %d", len(env), len(tfhttp.Names()))
	}
	a, b := tfhttp.RandomCredentials(), tfhttp.RandomCredentials()
	if a == b || len(a.Password) < 32 {
		t.Errorf("random credentials %+v, %+v: want long and different", a, b)
	}
}

// A run whose lease was taken over by a newer run (here: force-released by
// an operator, then locked by another process) writes before it has found
// out: the fence refuses the write, and the newer run's state stays.
func TestServer_AStaleRunsWriteIsRefusedByTheFence(t *testing.T) {
	b := newBackend(t, nil) // leases of a minute: the stale run does not notice before it writes
	if status, _ := b.lock("stale-run"); status != http.StatusOK {
		t.Fatal(status)
	}
	if status, _ := b.do(http.MethodPost, "ID=stale-run", state("1")); status != http.StatusOK {
		t.Fatal(status)
	}
	sdk, err := s3lock.New(b.ns.Client, b.ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st := b.current()
	if err := sdk.ForceRelease(t.Context(), s3lock.Token{Bucket: b.ns.Bucket, Name: st.Name, Epoch: st.Epoch}); err != nil {
		t.Fatal(err)
	}
	newer, err := tfstate.New(b.ns.Client, sdk, tfstate.Config{Bucket: b.ns.Bucket, Key: b.key(), LockFile: true})
	if err != nil {
		t.Fatal(err)
	}
	id, err := newer.Lock(t.Context(), tfstate.DefaultWorkspace, "OperationTypeApply")
	if err != nil {
		t.Fatal(err)
	}
	if err := newer.Write(t.Context(), tfstate.DefaultWorkspace, state("2")); err != nil {
		t.Fatal(err)
	}
	if status, body := b.do(http.MethodPost, "ID=stale-run", state(`"stale"`)); status != http.StatusConflict {
		t.Errorf("the stale run's write: %d %s; want 409", status, body)
	}
	if got, _ := newer.Read(t.Context(), tfstate.DefaultWorkspace); !bytes.Equal(got, state("2")) {
		t.Errorf("the state is %q; want the newer run's", got)
	}
	if !strings.Contains(b.logged(), "a newer lease of the lock") {
		t.Errorf("the refusal does not say why: %s", b.logged())
	}
	if err := newer.Unlock(t.Context(), tfstate.DefaultWorkspace, id); err != nil {
		t.Fatal(err)
	}
}

// Force-unlock as each CLI sends it: OpenTofu puts the lock ID in the
// UNLOCK's lock info; Terraform sends an empty body, and the ID comes from
// the server's ForceUnlockID (backend run reads it from the command line).
func TestServer_ForceUnlockAsEachCLISendsIt(t *testing.T) {
	t.Run("OpenTofu: the ID in the body", func(t *testing.T) {
		b := newBackend(t, nil)
		if status, _ := b.lock("run"); status != http.StatusOK {
			t.Fatal(status)
		}
		epoch := tfstate.LockID(b.current().Epoch)
		if status := b.unlock(epoch); status != http.StatusOK {
			t.Fatalf("UNLOCK {\"ID\":%q}: %d", epoch, status)
		}
		if b.current().Phase() == s3lock.PhaseHeld {
			t.Error("the lock is still held")
		}
	})
	t.Run("Terraform: an empty body, the ID from the command line", func(t *testing.T) {
		b := newBackend(t, func(c *tfhttp.Config) { c.ForceUnlockID = "1" })
		if status, _ := b.lock("run"); status != http.StatusOK || b.current().Epoch != 1 {
			t.Fatalf("LOCK: %d, epoch %d", status, b.current().Epoch)
		}
		if status, _ := b.do(tfhttp.MethodUnlock, "", nil); status != http.StatusOK {
			t.Fatalf("an empty UNLOCK with ForceUnlockID 1: %d", status)
		}
		if b.current().Phase() == s3lock.PhaseHeld {
			t.Error("the lock is still held")
		}
	})
}

// The objects of a state's lock are not states: a request cannot name them.
func TestServer_RefusesTheLocksObjectsAsStates(t *testing.T) {
	b := newBackend(t, nil)
	for _, key := range []string{b.key() + tfstate.LockFileSuffix, b.key() + tfstate.LockSuffix + "/lock-0000000001.json"} {
		if status, _ := b.doAs(creds, http.MethodPost, key, "", state("1")); status != http.StatusBadRequest {
			t.Errorf("POST to %s: %d; want 400", key, status)
		}
	}
}
