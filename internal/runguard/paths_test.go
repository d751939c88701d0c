//go:build unix

package runguard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The guard runs in another directory than the provider (next to its
// socket) and loads the AWS configuration itself: the files the provider
// names with relative paths must reach it as the provider means them.

// relativeTo makes the directory of p the current one for the rest of the
// test, and returns p's name in it. (A path climbing out with "../" would
// not do: from a directory closer to the root it may reach the same file.)
func relativeTo(t *testing.T, p string) string {
	t.Helper()
	t.Chdir(filepath.Dir(p))
	return filepath.Base(p)
}

// adopt claims name for the run, acquires it with sdk and hands it to the
// guard with cfg; it returns Adopt's answer.
func adopt(t *testing.T, c *Client, sdk *s3lock.Client, cfg ClientConfig, bucket, name string) (*Lease, error) {
	t.Helper()
	held, err := c.Claim(t.Context(), cfg, bucket, name)
	if err != nil || held != nil {
		t.Fatalf("Claim(%s) = %+v, %v; want it granted", name, held, err)
	}
	l, err := sdk.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c.Adopt(t.Context(), l.Detach(), cfg)
}

// A whole-run lease on a store with a private CA that the provider block
// names with a relative custom_ca_bundle: with the options resolved, as the
// provider sends them, the guard reaches the store and renews the lease (a
// regression test: the guard once got the relative path and failed); sent
// unresolved, the guard cannot find the bundle.
func TestGuard_RelativeCABundle(t *testing.T) {
	st := s3test.NewTLSStore(t)
	tg := st.Target
	sdk, err := s3lock.New(st.Client, st.Bucket, s3lock.WithHolder("provider"))
	if err != nil {
		t.Fatal(err)
	}
	opts := awsclient.Options{Region: tg.Region, AccessKey: tg.AccessKey, SecretKey: tg.SecretKey, Endpoint: tg.Endpoint,
		UsePathStyle: true, CustomCABundle: relativeTo(t, st.CAFile), MaxAttempts: 1}
	resolved, err := opts.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)

	if _, err := adopt(t, c, sdk, ClientConfig{Holder: "provider", AWS: opts}, st.Bucket, "tls/unresolved"); err == nil ||
		!strings.Contains(err.Error(), "custom CA bundle") {
		t.Fatalf("Adopt with the relative bundle unresolved = %v; want the guard not to find it (else this proves nothing)", err)
	}
	lease, err := adopt(t, c, sdk, ClientConfig{Holder: "provider", AWS: resolved}, st.Bucket, "tls/resolved")
	if err != nil {
		t.Fatalf("Adopt with the resolved options: %v", err)
	}
	if err := c.Bye(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.end()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := sdk.Current(t.Context(), "tls/resolved")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held {
			if !st.Released || st.Epoch != lease.Token.Epoch {
				t.Fatalf("after the run the lock is %+v; want epoch %d released by the guard", st, lease.Token.Epoch)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard did not release the lock within a minute: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The AWS variables that name files, which the SDK reads itself (here
// AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE with the profile the
// options name), reach the guard as absolute paths.
func TestGuard_RelativeFilesOfTheEnvironment(t *testing.T) {
	e := newEnv(t)
	tg := e.ns.Target
	dir := t.TempDir()
	conf, creds := filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "[profile guardtest]\nregion = %s\n", tg.Region), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, fmt.Appendf(nil, "[guardtest]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		tg.AccessKey, tg.SecretKey), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", relativeTo(t, conf))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Base(creds))
	cfg := ClientConfig{Holder: "provider", AWS: awsclient.Options{Profile: "guardtest", Endpoint: tg.Endpoint, UsePathStyle: tg.PathStyle}}
	f := startRun(t, "exec sleep 300")
	c := NewClient(f.run)
	lease, err := adopt(t, c, e.sdk, cfg, e.ns.Bucket, e.ns.Name("env-files"))
	if err != nil {
		t.Fatalf("Adopt with the profile of relative AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE: %v", err)
	}
	if err := c.Bye(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.end()
	if st := e.settled(t, "env-files"); !st.Released || st.Epoch != lease.Token.Epoch {
		t.Fatalf("after the run the lock is %+v; want epoch %d released by the guard", st, lease.Token.Epoch)
	}
}
