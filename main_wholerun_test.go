package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// TestAccMain_WholeRunUnavailable runs the built provider binary under the
// real CLI where the run guard cannot be had. An ephemeral lease that asks
// for the whole run (the default) then fails before it takes the lock, with a
// diagnostic naming the cause and the way out — never a lease per phase that
// nobody asked for. One that asks for a lease per phase (scope = "phase")
// gets exactly that: the plan and the apply each take the lock.
func TestAccMain_WholeRunUnavailable(t *testing.T) {
	h := harness(t)
	badDir := t.TempDir()
	shared := filepath.Join(badDir, fmt.Sprintf("s3lock-run-%d", os.Getuid()))
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		env   []string
		scope string
		lease string
		// want is what the failure says; empty: the apply succeeds.
		want []string
		// epochs is how many epochs the lock has afterwards.
		epochs uint64
	}{
		{name: "guard turned off", env: []string{"S3LOCK_RUN_GUARD=off"},
			want: []string{"Cannot hold lock for the whole run", "turned off by S3LOCK_RUN_GUARD", "Remove S3LOCK_RUN_GUARD", `scope = "phase"`}},
		{name: "guard directory not private", env: []string{"XDG_RUNTIME_DIR=" + badDir},
			want: []string{"Cannot hold lock for the whole run", "must be a directory of user", "mode 0700", "XDG_RUNTIME_DIR"}},
		{name: "lease too short for the guard", lease: "3s",
			want: []string{"Lease too short for a whole run", "lease_duration 3s is shorter than 5s"}},
		// Asked for explicitly, a lease per phase: the plan's epoch,
		// released when the plan ends, then the apply's.
		{name: "per phase asked for", env: []string{"S3LOCK_RUN_GUARD=off"}, scope: "phase", epochs: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			lock := ns.Name("deploy/prod")
			extra := ""
			if tc.scope != "" {
				extra += fmt.Sprintf("  scope  = %q\n", tc.scope)
			}
			if tc.lease != "" {
				extra += fmt.Sprintf("  lease_duration = %q\n", tc.lease)
			}
			work := filepath.Join(t.TempDir(), "work")
			writeFile(t, filepath.Join(work, "main.tf"), providerHCL(ns.Target, "e2e")+fmt.Sprintf(`
ephemeral "s3lock_lease" "run" {
  bucket = %q
  name   = %q
%s}

resource "terraform_data" "work" {
  depends_on = [ephemeral.s3lock_lease.run]
}
`, ns.Bucket, lock, extra))
			if out, err := h.Init(t.Context(), work); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			cmd := h.Command(t.Context(), work, "apply", "-auto-approve", "-input=false", "-no-color")
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			text := strings.Join(strings.Fields(string(out)), " ")
			switch {
			case len(tc.want) == 0 && err != nil:
				t.Fatalf("apply: %v\n%s", err, out)
			case len(tc.want) > 0 && err == nil:
				t.Fatalf("apply succeeded; want it to fail saying %q\n%s", tc.want, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("the output lacks %q:\n%s", w, out)
				}
			}
			st, err := s3lockClient(t, ns).Current(t.Context(), lock)
			if err != nil {
				t.Fatal(err)
			}
			if st.Epoch != tc.epochs || st.Held {
				t.Errorf("after the run the lock is %+v; want %d epochs, none held", st, tc.epochs)
			}
		})
	}
}
