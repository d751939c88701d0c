package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// echoFactories adds the echo provider, which copies the ephemeral lease's
// result into state so that a test can look at it.
var echoFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"echo": echoprovider.NewProviderServer(),
}

// perPhase asks an ephemeral lease for one lease per phase. The acceptance
// tests that serve the provider in their own process (ProtoV6ProviderFactories)
// need it: such a provider is not started by terraform, so it cannot hold a
// lease for the whole run, and a lease that asks for one fails
// (TestAccLeaseEphemeral_WholeRunNeedsTerraform).
const perPhase = `scope = "phase"`

// ephemeralLeaseConfig is an ephemeral s3lock_lease named run.
func ephemeralLeaseConfig(bucket, name string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ephemeral \"s3lock_lease\" \"run\" {\n  bucket = %q\n  name   = %q\n", bucket, name)
	for _, l := range extra {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// echoedLease reads the ephemeral lease's result that the echo resource
// recorded during apply.
type echoedLease struct {
	Slots         json.Number       `json:"slots"`
	Slot          json.Number       `json:"slot"`
	Epoch         json.Number       `json:"epoch"`
	Key           string            `json:"key"`
	Holder        string            `json:"holder"`
	LeaseDuration string            `json:"lease_duration"`
	WaitTimeout   string            `json:"wait_timeout"`
	Order         string            `json:"order"`
	Mode          string            `json:"mode"`
	ExpiresAt     string            `json:"expires_at"`
	AcquiredAt    string            `json:"acquired_at"`
	Metadata      map[string]string `json:"metadata"`
	Leases        []struct {
		Name  string      `json:"name"`
		Epoch json.Number `json:"epoch"`
		Key   string      `json:"key"`
	} `json:"leases"`
}

// checkEchoedLease is a state check on echo.lease's data.
type checkEchoedLease func(echoedLease) error

func (f checkEchoedLease) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	if req.State == nil || req.State.Values == nil || req.State.Values.RootModule == nil {
		resp.Error = fmt.Errorf("no state")
		return
	}
	for _, r := range req.State.Values.RootModule.Resources {
		if r.Address != "echo.lease" {
			continue
		}
		raw, err := json.Marshal(r.AttributeValues["data"])
		if err != nil {
			resp.Error = err
			return
		}
		var l echoedLease
		if err := json.Unmarshal(raw, &l); err != nil {
			resp.Error = fmt.Errorf("echo.lease data %s: %w", raw, err)
			return
		}
		resp.Error = f(l)
		return
	}
	resp.Error = fmt.Errorf("echo.lease is not in state")
}

// TestAccLeaseEphemeral_OpenRenewClose: apply opens the lease, Terraform renews
// it while a resource that depends on it waits for another lock, and closes
// (releases) it when the run ends.
func TestAccLeaseEphemeral_OpenRenewClose(t *testing.T) {
	e := newAccEnv(t)
	run, blocked := e.name("run"), e.name("blocked")
	config := requiredProviders("s3lock", "echo") + e.providerBlock(nil) +
		ephemeralLeaseConfig(e.bucket, run, perPhase, `lease_duration = "4s"`, `metadata = { purpose = "serialize" }`) + `
provider "echo" {
  data = ephemeral.s3lock_lease.run
}

resource "echo" "lease" {}
` + fmt.Sprintf(`
resource "s3lock_lease" "blocked" {
  bucket     = %q
  name       = %q
  depends_on = [ephemeral.s3lock_lease.run]

  timeouts {
    create = "2m"
  }
}
`, e.bucket, blocked)

	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(echoFactories),
		Steps: []tfresource.TestStep{{
			// Someone else holds the lock "blocked" until the run's lease
			// has been renewed: the apply can only finish after a renewal.
			PreConfig: func() {
				l := e.hold(t, "other-team", blocked, time.Hour)
				observer := e.sdk(t, "observer")
				go func() {
					defer l.Release(context.Background()) //nolint:errcheck // the test checks the outcome
					deadline := time.Now().Add(2 * time.Minute)
					for time.Now().Before(deadline) {
						st, err := observer.Current(context.Background(), run)
						if err == nil && st.Held && st.Renewals > 0 {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
			},
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				checkEchoedLease(func(l echoedLease) error {
					epoch, err := l.Epoch.Int64()
					if err != nil {
						return err
					}
					// The plan took the lock first, with epoch 1; the apply
					// took the next one.
					if epoch < 2 {
						return fmt.Errorf("apply's lease has epoch %d; want at least 2 (plan and apply each take the lock)", epoch)
					}
					if l.Key != (s3lock.Token{Name: run, Epoch: uint64(epoch)}).Key() || l.Holder != "terraform-test" ||
						l.LeaseDuration != "4s" || l.WaitTimeout != "5m" || l.Order != "fifo" || l.Metadata["purpose"] != "serialize" {
						return fmt.Errorf("ephemeral result %+v", l)
					}
					st := e.current(t, run)
					switch {
					case st.Epoch != uint64(epoch):
						return fmt.Errorf("the lock's newest epoch is %d, the apply's lease was %d", st.Epoch, epoch)
					case !st.Released || st.Held:
						return fmt.Errorf("after the apply the lease is not released: %+v", st)
					case st.Renewals < 2:
						// One write for the renewal, one for the release.
						return fmt.Errorf("the lease was written %d times after its creation; want a renewal and a release", st.Renewals)
					case st.Holder != "terraform-test" || st.Metadata["purpose"] != "serialize":
						return fmt.Errorf("the lease's holder and metadata: %+v", st)
					}
					return nil
				}),
			},
		}},
	})
}

// TestAccLeaseEphemeral_ReleasedAtShutdownWhenApplyFails: when a resource that
// depends on the lease fails, Terraform does not close the lease; the
// provider releases it when its server stops (main calls the cleanup of
// NewWithCleanup; here the test does, as TestAccMain_* does with the real
// binary).
func TestAccLeaseEphemeral_ReleasedAtShutdownWhenApplyFails(t *testing.T) {
	e := newAccEnv(t)
	run, blocked := e.name("run"), e.name("blocked")
	e.hold(t, "other-team", blocked, time.Hour)
	config := e.providerConfig(nil) + ephemeralLeaseConfig(e.bucket, run, perPhase) + fmt.Sprintf(`
resource "s3lock_lease" "blocked" {
  bucket     = %q
  name       = %q
  depends_on = [ephemeral.s3lock_lease.run]

  timeouts {
    create = "1s"
  }
}
`, e.bucket, blocked)
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config:      config,
			ExpectError: matchError("Could not acquire lock", `Lock "`+blocked+`" in bucket "`+e.bucket+`"`, "held by", "other-team"),
		}},
	})
	if e.leases.len() == 0 {
		// A terraform that closes ephemeral resources after a failure
		// leaves nothing to clean up.
		if st := e.current(t, run); st.Held || !st.Released {
			t.Fatalf("terraform closed the lease, yet the lock is %+v", st)
		}
		return
	}
	released, err := e.leases.releaseAll(t.Context())
	if err != nil || len(released) != 1 || released[0].Name != run {
		t.Fatalf("releasing the leases left open: released %v, error %v; want the lease on %q", released, err, run)
	}
	st := e.current(t, run)
	if st.Epoch != released[0].Epoch || st.Held || !st.Released {
		t.Errorf("after the cleanup, the run's lock: epoch %d held %v released %v; want epoch %d released",
			st.Epoch, st.Held, st.Released, released[0].Epoch)
	}
}

// TestAccLeaseEphemeral_WaitsForHolder: Open waits while the lock is held and
// acquires it once the holder releases it.
func TestAccLeaseEphemeral_WaitsForHolder(t *testing.T) {
	e := newAccEnv(t)
	run := e.name("run")
	l := e.hold(t, "other-team", run, time.Hour)
	e.setOnWait(func(h *s3lock.HeldError) {
		if h.Holder == "other-team" {
			go func() { _ = l.Release(context.Background()) }()
		}
	})
	config := requiredProviders("s3lock", "echo") + e.providerBlock(nil) +
		ephemeralLeaseConfig(e.bucket, run, perPhase, `wait_timeout = "2m"`) + `
provider "echo" {
  data = ephemeral.s3lock_lease.run
}

resource "echo" "lease" {}
`
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(echoFactories),
		Steps: []tfresource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				checkEchoedLease(func(el echoedLease) error {
					epoch, err := el.Epoch.Int64()
					if err != nil || uint64(epoch) <= l.Token().Epoch {
						return fmt.Errorf("the run's lease has epoch %s; want one after the other team's %d", el.Epoch, l.Token().Epoch)
					}
					return nil
				}),
			},
		}},
	})
}

// TestAccLeaseEphemeral_Superseded: a run with order = "newest" that waits
// for a held lock stands down when a newer "newest" run queues: it fails
// without taking the lock, before anything that depends on the lease
// changes.
func TestAccLeaseEphemeral_Superseded(t *testing.T) {
	e := newAccEnv(t)
	run := e.name("deploy/prod")
	e.hold(t, "commit-41", run, time.Hour)
	e.onceWaiting("commit-41", func() {
		if err := e.queue("commit-43", run, s3lock.WithOrder(s3lock.OrderNewest)); err != nil {
			t.Error(err)
		}
	})
	deployed := filepath.Join(t.TempDir(), "deployed")
	config := e.providerConfig(nil) + ephemeralLeaseConfig(e.bucket, run, perPhase, `order = "newest"`, `wait_timeout = "1m"`) + fmt.Sprintf(`
resource "terraform_data" "deploy" {
  provisioner "local-exec" {
    command = "touch %s"
  }
  depends_on = [ephemeral.s3lock_lease.run]
}
`, deployed)
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			ExpectError: matchError("Superseded by a newer run", `Lock "`+run+`" in bucket "`+e.bucket+`"`,
				`A newer run, "commit-43", queued for the lock with order = "newest"`, "nothing that depends on the lock was changed"),
		}},
	})
	if _, err := os.Stat(deployed); err == nil {
		t.Error("the superseded run deployed")
	}
	if st := e.current(t, run); st.Epoch != 1 || !st.Held || st.Holder != "commit-41" {
		t.Errorf("after the run stood down, the lock is %+v; want epoch 1 still held by commit-41", st)
	}
}

// TestAccLeaseEphemeral_Validation: bad arguments fail before any lock is
// taken, with a diagnostic naming the bucket and lock.
func TestAccLeaseEphemeral_Validation(t *testing.T) {
	e := newAccEnv(t)
	cases := []struct {
		name  string
		extra []string
		lock  string
		want  *regexp.Regexp
	}{
		{
			name:  "bad lease duration",
			lock:  "ok",
			extra: []string{`lease_duration = "2 minutes"`},
			want:  matchError("Invalid duration", `lock "ok" in bucket "`+e.bucket+`"`),
		},
		{
			name:  "negative wait",
			lock:  "ok",
			extra: []string{`wait_timeout = "-1s"`},
			want:  matchError("Duration out of range", "wait_timeout", `bucket "`+e.bucket+`"`),
		},
		{
			name:  "bad order",
			lock:  "ok",
			extra: []string{`order = "oldest"`},
			want:  matchError("Invalid order", `order "oldest"`, `"fifo"`),
		},
		{
			name:  "unknown scope",
			lock:  "ok",
			extra: []string{`scope = "apply"`},
			want:  matchError("Invalid Attribute Value Match", "scope", `"run"`, `"phase"`),
		},
		{
			name:  "negative slots",
			lock:  "ok",
			extra: []string{"slots = -1"},
			want:  matchError("Invalid Attribute Value", "slots", "between 1 and 64, got: -1"),
		},
		{
			name: "empty name",
			lock: "",
			want: matchError("Invalid lock name", `for bucket "`+e.bucket+`"`, "empty"),
		},
		{
			name: "name escaping its prefix",
			lock: "../etc",
			want: matchError("Invalid lock name", `"../etc" for bucket "`+e.bucket+`"`, "escape"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tfresource.ParallelTest(t, tfresource.TestCase{
				TerraformVersionChecks:   ephemeralVersions,
				ProtoV6ProviderFactories: e.protoV6Factories(),
				Steps: []tfresource.TestStep{{
					Config:      e.providerConfig(nil) + ephemeralLeaseConfig(e.bucket, tc.lock, tc.extra...),
					PlanOnly:    true,
					ExpectError: tc.want,
				}},
			})
		})
	}
}

func TestRenewAt(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		left, want time.Duration
	}{
		{left: 3 * time.Minute, want: time.Minute},
		{left: 3 * time.Second, want: time.Second},
		{left: 0, want: 0},
		{left: -time.Second, want: 0},
	}
	for _, tc := range cases {
		if got := renewAt(now, now.Add(tc.left)).Sub(now); got != tc.want {
			t.Errorf("renewAt with %s left = now+%s, want now+%s", tc.left, got, tc.want)
		}
	}
}

// outageProxy forwards requests to the store, or answers 503 while down (the
// store is unreachable for this provider only), or 403 AccessDenied while
// denying (credentials that are valid but lack the permissions).
type outageProxy struct {
	down, deny atomic.Bool
	proxy      *httputil.ReverseProxy
}

func newOutageProxy(t *testing.T, target string) (*outageProxy, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &outageProxy{proxy: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the request is signed for the client's Host header
	}}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *outageProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.deny.Load() {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
		return
	}
	if p.down.Load() {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `<Error><Code>ServiceUnavailable</Code><Message>outage</Message></Error>`)
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// TestAccLeaseEphemeral_SurvivesStoreOutage: the store stops answering for
// longer than Terraform's renewal schedule allows, in the middle of a run;
// the lease renews itself in the provider and retries, so nobody else takes
// the lock while the run lasts (Terraform stops renewing after one failed
// Renew, and used to let the lease lapse).
func TestAccLeaseEphemeral_SurvivesStoreOutage(t *testing.T) {
	e := newAccEnv(t)
	run := e.name("outage")
	proxy, endpoint := newOutageProxy(t, e.ns.Target.Endpoint)
	// The work marks when it starts and ends: a rival may take the lock
	// before and after, never in between.
	dir := t.TempDir()
	started, ended := filepath.Join(dir, "started"), filepath.Join(dir, "ended")
	config := e.providerConfig(map[string]string{"endpoints": fmt.Sprintf("{ s3 = %q }", endpoint), "max_retries": "0"}) +
		ephemeralLeaseConfig(e.bucket, run, perPhase, `lease_duration = "6s"`) + fmt.Sprintf(`
resource "terraform_data" "work" {
  provisioner "local-exec" {
    command = "touch %s && sleep 12 && touch %s"
  }
  depends_on = [ephemeral.s3lock_lease.run]
}
`, started, ended)
	working := func() bool {
		_, errStart := os.Stat(started)
		_, errEnd := os.Stat(ended)
		return errStart == nil && errEnd != nil
	}
	rival := e.sdk(t, "rival")
	var stolen, renewals atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		cut := false
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			st, err := rival.Current(context.Background(), run)
			if err != nil || st.Epoch < 2 || !st.Held {
				continue // the plan's epoch 1, or between plan and apply
			}
			if st.Renewals > renewals.Load() {
				renewals.Store(st.Renewals)
			}
			// Once the apply holds its epoch, cut the store off for 3.5s:
			// past the 2s renewal and Terraform's RenewAt, well short of the
			// 5.4s the lease is trusted.
			if !cut && st.Renewals == 0 {
				cut = true
				proxy.down.Store(true)
				time.AfterFunc(3500*time.Millisecond, func() { proxy.down.Store(false) })
			}
			if !working() {
				continue
			}
			if l, err := rival.TryAcquire(context.Background(), run, s3lock.WithoutAutoRenew()); err == nil {
				if working() { // still: the run's work overlapped the rival's lease
					stolen.Store(l.Token().Epoch)
				}
				_ = l.Release(context.Background())
			}
		}
	}()
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps:                    []tfresource.TestStep{{Config: config}},
	})
	close(stop)
	<-done
	if epoch := stolen.Load(); epoch != 0 {
		t.Fatalf("another client acquired the lock (epoch %d) while the run's work under it was still going", epoch)
	}
	if !working() {
		if _, err := os.Stat(ended); err != nil {
			t.Fatal("the work under the lease never ran")
		}
	}
	if n := renewals.Load(); n < 3 {
		t.Errorf("the apply's lease was renewed %d times during the 12s step; want at least 3 (every 2s, retried through the outage)", n)
	}
	if st := e.current(t, run); st.Held || !st.Released {
		t.Fatalf("after the run the lock is %+v; want it released", st)
	}
}
