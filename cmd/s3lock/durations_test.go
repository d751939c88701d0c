package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestAcquire_LeaseZeroIsRefusedNotAMinute: --lease 0 was taken for "no
// --lease" and became the SDK's one-minute lease (issue 36), for acquire,
// run and the backend alike. It is a usage error now that takes no lock and
// runs nothing.
func TestAcquire_LeaseZeroIsRefusedNotAMinute(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("lease-zero")
	ran := filepath.Join(c.dir, "ran")
	for _, args := range [][]string{
		{"acquire", name, "--lease", "0"},
		{"acquire", name, "--lease", "0s"},
		{"run", name, "--lease", "0", "--", "touch", ran},
		{"backend", "run", "--key", "app/terraform.tfstate", "--lease", "0", "--", "touch", ran},
	} {
		r := c.run(args...)
		if r.code != exitUsage || r.stdout != "" ||
			!strings.Contains(r.stderr, `for "--lease" flag: must be between 2s and 720h; leave --lease out for the default (`) {
			t.Errorf("s3lock %q: %s; want a usage error naming --lease, its range and its default", args, r)
		}
	}
	if st := c.current(name); st.Epoch != 0 {
		t.Errorf("after --lease 0, lock %s has epoch %d (held %v, lease %s); want it never taken", name, st.Epoch, st.Held, st.LeaseDuration)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a command ran under --lease 0")
	}
}

// durationFlagCase is what one duration flag of one command does with 0
// and with a negative value.
type durationFlagCase struct {
	cmd  string // the command's path, e.g. "backend serve"
	flag string
	// zero is what the help says 0 means ("0 tries once"); "" when the
	// flag refuses 0.
	zero string
}

// durationFlags lists every duration flag of every command; the test
// fails when a command has one that is not listed.
var durationFlags = []durationFlagCase{
	{"acquire", "lease", ""},
	{"acquire", "wait", "0 tries once"},
	{"acquire", "max-hold", "0: no limit"},
	{"run", "lease", ""},
	{"run", "wait", "0 tries once"},
	{"run", "grace-period", ""},
	{"run", "max-hold", "0: no limit"},
	{"status", "timeout", "0: never"},
	{"backend run", "lease", ""},
	{"backend run", "wait", "0 tries once (Terraform's -lock-timeout then retries)"},
	{"backend serve", "lease", ""},
	{"backend serve", "wait", "0 tries once (Terraform's -lock-timeout then retries)"},
	{"backend serve", "max-hold", "0: no limit"},
	{"", "assume-role-duration", ""}, // global: every command has them
	{"", "web-identity-duration", ""},
}

// TestDurationFlags_ZeroAndNegative: every duration flag refuses negative
// values, and refuses 0 unless its help says what 0 means; the refusal
// names the flag, what it takes and (for 0) the default to get instead.
func TestDurationFlags_ZeroAndNegative(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	listed := map[string]bool{}
	for _, dc := range durationFlags {
		listed[dc.cmd+" --"+dc.flag] = false // found: true
	}
	walkFlags(t, func(cmd string, f *pflag.Flag, global bool) {
		if f.Value.Type() != "duration" {
			return
		}
		if global {
			cmd = ""
		}
		if _, ok := listed[cmd+" --"+f.Name]; !ok {
			t.Errorf("s3lock %s --%s is a duration flag missing from durationFlags: say what 0 does", cmd, f.Name)
		}
		listed[cmd+" --"+f.Name] = true
	})
	for flag, found := range listed {
		if !found {
			t.Errorf("s3lock %s is not a duration flag", flag)
		}
	}
	for _, dc := range durationFlags {
		args := strings.Fields(dc.cmd)
		if dc.cmd == "" {
			args = []string{"status"}
		}
		for _, v := range []string{"0", "0s", "-1s", "-5m"} {
			t.Run(strings.Join(args, "_")+"--"+dc.flag+"="+v, func(t *testing.T) {
				r := c.run(append(slices.Clone(args), "--"+dc.flag, v, "--frobnicate")...)
				says := `invalid argument "` + v + `" for "--` + dc.flag + `" flag: `
				switch {
				case v[0] == '-' && dc.zero != "":
					says += "must not be negative; " + dc.zero
				case v[0] == '-' || dc.zero == "":
					says += "must be "
				default: // accepted: the error is the next flag's
					says = "--frobnicate"
				}
				if r.code != exitUsage || !strings.Contains(r.stderr, says) || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("s3lock %s --%s %s: %s; want one line saying %q", dc.cmd, dc.flag, v, r, says)
				}
			})
		}
	}
}

// TestDurationFlags_ZeroDoesWhatTheHelpSays: where 0 means something, it
// does just that: --wait 0 tries once (a held lock: exit 3 at once),
// status --timeout 0 never gives up (it answers as without a limit).
func TestDurationFlags_ZeroDoesWhatTheHelpSays(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("zero-means")
	lease, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	for _, args := range [][]string{{"acquire", name, "--wait", "0"}, {"run", name, "--wait", "0", "--", "true"}} {
		if r := c.run(args...); r.code != exitHeld || !strings.Contains(r.stderr, "is held by test-sdk (epoch 1) for at most") {
			t.Errorf("s3lock %q on a held lock: %s; want exit %d at once, naming the holder", args, r, exitHeld)
		}
	}
	if r := c.run("status", name, "--timeout", "0"); r.code != 0 || !strings.Contains(r.stdout, "test-sdk") {
		t.Errorf("status --timeout 0: %s; want the holder shown, with no time limit", r)
	}
}

// TestHelp_OneDefaultPerFlag: pflag appends "(default X)" to a flag's
// help unless X is the type's zero; a flag that says its own default must
// not get a second one (issue 36: --grace-period printed two).
func TestHelp_OneDefaultPerFlag(t *testing.T) {
	walkFlags(t, func(cmd string, f *pflag.Flag, _ bool) {
		fs := pflag.NewFlagSet(cmd, pflag.ContinueOnError)
		fs.AddFlag(f)
		line := fs.FlagUsages()
		if n := strings.Count(line, "(default") + strings.Count(line, "; default"); n > 1 {
			t.Errorf("s3lock %s --%s: %d defaults in %q", cmd, f.Name, n, strings.TrimSpace(line))
		}
		if strings.Contains(line, "0m0s") || strings.Contains(line, "h0m") {
			t.Errorf("s3lock %s --%s: %q; write durations as people do (10m, 720h)", cmd, f.Name, strings.TrimSpace(line))
		}
	})
}

// walkFlags calls fn with every flag of every command (by the command's
// path without "s3lock"), global says whether the flag is the root's.
func walkFlags(t *testing.T, fn func(cmd string, f *pflag.Flag, global bool)) {
	t.Helper()
	root := newApp(nil, io.Discard, io.Discard).rootCommand()
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), "s3lock"), " ")
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			fn(path, f, cmd == root || root.PersistentFlags().Lookup(f.Name) == f)
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
