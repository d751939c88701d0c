//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// A bucket whose policy denies unencrypted PUTs: `s3lock run --encrypt` (or
// S3LOCK_ENCRYPT) takes and releases the lock; without it, s3lock exits 1
// and says access was denied.
func TestRun_EncryptedBucket(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	policy := s3test.NewEncryptionPolicy(t, c.ns.Target.Endpoint)
	endpoint, denied := policy.URL, &policy.Denied

	t.Run("--encrypt", func(t *testing.T) {
		name := c.name("encrypted/flag")
		c.mustRun("run", "--quiet", "--endpoint", endpoint, "--encrypt", name, "--", "true")
		if st := c.current(name); st.Epoch != 1 || !st.Released {
			t.Fatalf("after run the lock is %+v, want epoch 1 released", st)
		}
		if n := denied.Load(); n != 0 {
			t.Fatalf("the bucket policy denied %d unencrypted PUTs", n)
		}
	})
	t.Run(envEncrypt, func(t *testing.T) {
		name := c.name("encrypted/env")
		r := c.runWith(append(c.without(envEncrypt), envEncrypt+"=true"), "", "run", "--quiet", "--endpoint", endpoint, name, "--", "true")
		if r.code != exitOK {
			t.Fatalf("got %s, want exit 0", r)
		}
		if st := c.current(name); !st.Released {
			t.Fatalf("after run the lock is %+v, want it released", st)
		}
	})
	t.Run("without encryption", func(t *testing.T) {
		name := c.name("encrypted/off")
		r := c.run("run", "--quiet", "--endpoint", endpoint, name, "--", "true")
		if r.code != exitError || !strings.Contains(r.stderr, "AccessDenied") {
			t.Fatalf("got %s, want exit %d saying AccessDenied", r, exitError)
		}
		if denied.Load() == 0 {
			t.Fatal("the bucket policy saw no unencrypted PUT")
		}
	})
}
