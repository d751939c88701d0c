package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestAccMain_WaitNamesTheHolder runs the built provider binary under the
// real CLI, without TF_LOG, against a lock someone else holds: Terraform
// shows only "Still opening..." (or "Still creating...") while a lease
// waits, and the holder was in the log alone (issue 36). A lease that got
// the lock after waiting says, in a warning in Terraform's own output, whom
// it waited for, how long and its place in line; the whole run's ephemeral
// lease says too that Terraform's "Closing..." of it after the plan is no
// release. A lease whose wait ran out names the holder in its error, and the
// setting that raises the wait is the block's own: wait_timeout for the
// ephemeral resource, timeouts.create for the resource.
func TestAccMain_WaitNamesTheHolder(t *testing.T) {
	h := harness(t)
	cases := []struct {
		name string
		// block is the configuration of the lease, given the bucket and
		// the lock; the resource under it depends on it.
		block, address string
		// release, when set, releases the holder's lease once the run
		// waits in the lock's line (and, with stillWaiting, once
		// Terraform said it was still waiting): the run then gets the
		// lock.
		release      bool
		stillWaiting string
		// want is what the output says (LOCK and BUCKET stand for the
		// lock's name and bucket), wantNot what it does not.
		want    []string
		wantNot []string
	}{
		{name: "ephemeral lease waits, then holds it for the run", release: true,
			block: `ephemeral "s3lock_lease" "run" {
  bucket = %q
  name   = %q
}`, address: "ephemeral.s3lock_lease.run", stillWaiting: "ephemeral.s3lock_lease.run: Still opening...",
			want: []string{`Warning: Waited for lock "LOCK"`, `Lock "LOCK" in bucket "BUCKET": this run waited `,
				`When it asked, it was held by "alice@build-7" (epoch 1, since `, `It holds the lock now, at epoch 2 `,
				`the "Closing..." that Terraform shows for it when the plan ends only ends the plan's use of it`,
				"Apply complete!"}},
		{name: "resource waits, then holds it", release: true,
			block: `resource "s3lock_lease" "held" {
  bucket = %q
  name   = %q
}`, address: "s3lock_lease.held",
			want: []string{`Warning: Waited for lock "LOCK"`, `When it asked, it was held by "alice@build-7" (epoch 1, since `,
				`It holds the lock now, at epoch 2 `, "Apply complete!"},
			wantNot: []string{"Closing"}},
		{name: "ephemeral lease's wait runs out",
			block: `ephemeral "s3lock_lease" "run" {
  bucket       = %q
  name         = %q
  wait_timeout = "2s"
}`, address: "ephemeral.s3lock_lease.run",
			want:    []string{"Error: Could not acquire lock", `is held by "alice@build-7" (epoch 1`, "Wait for them (raise wait_timeout)"},
			wantNot: []string{"timeouts.create", "Warning: Waited"}},
		{name: "resource's wait runs out",
			block: `resource "s3lock_lease" "held" {
  bucket = %q
  name   = %q

  timeouts {
    create = "2s"
  }
}`, address: "s3lock_lease.held",
			want:    []string{"Error: Could not acquire lock", `is held by "alice@build-7" (epoch 1`, "Wait for them (raise timeouts.create)"},
			wantNot: []string{"wait_timeout", "Warning: Waited"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			lock := ns.Name("deploy/prod")
			alice, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("alice@build-7"))
			if err != nil {
				t.Fatal(err)
			}
			held, err := alice.TryAcquire(t.Context(), lock, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = held.Release(context.Background()) })
			work := filepath.Join(t.TempDir(), "work")
			writeFile(t, filepath.Join(work, "main.tf"), providerHCL(ns.Target, "e2e")+fmt.Sprintf(tc.block, ns.Bucket, lock)+
				fmt.Sprintf("\n\nresource \"terraform_data\" \"work\" {\n  depends_on = [%s]\n}\n", tc.address))
			if out, err := h.Init(t.Context(), work); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			cmd := h.Command(t.Context(), work, "apply", "-auto-approve", "-input=false", "-no-color")
			cmd.Env = append(cmd.Env, "TF_LOG=", "TF_LOG_PROVIDER=")
			var out lockedBuilder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.release {
				waitUntil(t, 2*time.Minute, func() bool {
					line, err := alice.Line(t.Context(), lock)
					return err == nil && len(line) > 0 && line[0].Holder == "e2e" &&
						(tc.stillWaiting == "" || strings.Contains(out.String(), tc.stillWaiting))
				}, func() string { return "the run never waited in the lock's line:\n" + out.String() })
				if err := held.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			err = cmd.Wait()
			text := out.String()
			t.Logf("terraform apply:\n%s", text)
			if tc.release != (err == nil) {
				t.Fatalf("apply: %v; want success %t", err, tc.release)
			}
			words := strings.Join(strings.Fields(text), " ")
			names := strings.NewReplacer("LOCK", lock, "BUCKET", ns.Bucket)
			for _, w := range tc.want {
				if w = names.Replace(w); !strings.Contains(words, w) {
					t.Errorf("the output lacks %q", w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(words, w) {
					t.Errorf("the output has %q", w)
				}
			}
			// One warning per wait: the apply's phase finds the lock the
			// run's (or the resource's) already.
			if n := len(regexp.MustCompile(`Warning: Waited for lock`).FindAllString(text, -1)); tc.release && n != 1 {
				t.Errorf("the output has %d wait warnings, want 1", n)
			}
		})
	}
}

// waitUntil polls cond until it holds, failing the test with what() once
// patience runs out.
func waitUntil(t *testing.T, patience time.Duration, cond func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
	}
}
