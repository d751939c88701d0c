package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every kind of bad input gets one line on stderr saying what is wrong (a
// usage error ends with a pointer to --help; a store that fails or refuses
// does not), nothing on stdout, and a non-zero exit code: never a panic, a
// usage dump or a hang.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("bad-input")
	with := func(kv ...string) []string { return append(slices.Clone(c.env), kv...) } // never c.env's array
	openCreds := filepath.Join(c.dir, "open-credentials")
	if err := os.WriteFile(openCreds, []byte("tf:0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string // replaces the test environment when set
		args []string
		code int
		// the line must contain this
		says string
	}{
		{"missing bucket", c.without("S3LOCK_BUCKET"), []string{"run", name, "--", "true"}, exitUsage, "S3LOCK_BUCKET"},
		{"missing bucket for status", c.without("S3LOCK_BUCKET"), []string{"status"}, exitUsage, "--bucket"},
		{"malformed bucket", nil, []string{"status", "--bucket", "Not_A_Bucket"}, exitUsage, "bucket name"},
		{"bad duration", nil, []string{"run", "--lease", "5x", name, "--", "true"}, exitUsage, "--lease"},
		{"lease too short", nil, []string{"run", "--lease", "1s", name, "--", "true"}, exitUsage, `"--lease" flag: must be between 2s and 720h`},
		{"negative wait", nil, []string{"acquire", "--wait", "-1s", name}, exitUsage, "--wait"},
		{"unknown order", nil, []string{"run", "--order", "bogus", name, "--", "true"}, exitUsage, `"--order" flag: invalid configuration: order "bogus": use "fifo"`},
		{"unknown order for acquire", nil, []string{"acquire", name, "--order", "oldest"}, exitUsage, "--order"},
		{"unknown flag", nil, []string{"status", "--frobnicate"}, exitUsage, "--frobnicate"},
		{"unknown flag after the name", nil, []string{"run", name, "--frobnicate", "--", "true"}, exitUsage, "--frobnicate"},
		{"unknown command", nil, []string{"frobnicate"}, exitUsage, "frobnicate"},
		{"unreachable endpoint", nil, []string{"run", "--endpoint", "http://127.0.0.1:1", name, "--", "true"}, exitError, "127.0.0.1:1"},
		{"unreachable endpoint for status", nil, []string{"status", "--endpoint", "http://127.0.0.1:1"}, exitError, "127.0.0.1:1"},
		{"endpoint that is not a URL", nil, []string{"status", "--endpoint", "127.0.0.1:9000"}, exitUsage, "endpoint"},
		{"invalid name", nil, []string{"run", "bad//name", "--", "true"}, exitUsage, "invalid lock name \"bad//name\": it contains an empty path segment (\"//\") (a lock name is a key path: segments of letters"},
		{"invalid name for status", nil, []string{"status", "/abs"}, exitUsage, "invalid lock name"},
		{"missing --", nil, []string{"run", name, "true"}, exitUsage, "'--'"},
		{"missing command", nil, []string{"run", name, "--"}, exitUsage, "command"},
		{"missing name", nil, []string{"run", "--", "true"}, exitUsage, "NAME"},
		{"two names", nil, []string{"acquire", name, name}, exitUsage, "one lock NAME"},
		{"bad output", nil, []string{"status", "-o", "yaml"}, exitUsage, "--output"},
		{"invalid name for watch", nil, []string{"watch", "bad//name"}, exitUsage, "invalid lock name"},
		{"missing name for watch", nil, []string{"watch"}, exitUsage, "NAME"},
		{"missing bucket for watch", c.without("S3LOCK_BUCKET"), []string{"watch", name}, exitUsage, "--bucket"},
		{"unknown state for watch --until", nil, []string{"watch", name, "--until", "held,gone"}, exitUsage, `"gone" is not a state: use not-held, free, held, released or lapsed`},
		{"bad output for watch", nil, []string{"watch", name, "-o", "table"}, exitUsage, "--output"},
		{"unreachable endpoint for watch", nil, []string{"watch", "--endpoint", "http://127.0.0.1:1", name}, exitError, "127.0.0.1:1"},
		{"bad prefix for status", nil, []string{"status", "--prefix", "/abs"}, exitUsage, "--prefix"},
		{"probe prefix for status", nil, []string{"status", "--prefix", "a/s3lock-probe/"}, exitUsage, "--prefix"},
		{"bad prefix for verify", nil, []string{"verify", "--prefix", "a//b"}, exitUsage, "--prefix"},
		{"probe prefix for verify", nil, []string{"verify", "--prefix", "s3lock-probe"}, exitUsage, "--prefix"},
		{"malformed token", nil, []string{"release", "--token", "{"}, exitUsage, "token"},
		{"missing token", nil, []string{"renew"}, exitUsage, envToken},
		{"token file missing", nil, []string{"release", "--token", "@/nonexistent/token"}, exitUsage, "token"},
		{"bad path-style setting", append(c.without(envPathStyle), envPathStyle+"=maybe"), []string{"status"}, exitUsage, envPathStyle},
		{"unknown ACL", nil, []string{"run", "--acl", "owner-only", name, "--", "true"}, exitUsage, `unknown canned ACL "owner-only"`},
		{"unknown ACL from the environment", append(c.without(envACL), envACL+"=owner-only"), []string{"status"}, exitUsage, "--acl"},
		{"KMS key without --encrypt", nil, []string{"run", "--kms-key-id", "alias/locks", name, "--", "true"}, exitUsage, "encryption is not turned on"},
		{"customer key not base64", append(c.without(envSSECKey), envSSECKey+"=not*base64!"), []string{"status"}, exitUsage, "not valid base64"},
		{"customer key of 16 bytes", append(c.without(envSSECKey), envSSECKey+"=c2l4dGVlbi1ieXRlLWtleQ=="), []string{"status"}, exitUsage, "32 bytes"},
		{"customer key with --encrypt", append(c.without(envSSECKey), envSSECKey+"=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="),
			[]string{"run", "--encrypt", name, "--", "true"}, exitUsage, "exclude each other"},
		{"bad encrypt setting", append(c.without(envEncrypt), envEncrypt+"=yes"), []string{"status"}, exitUsage, envEncrypt},
		{"bad epoch", nil, []string{"force-release", name, "--epoch", "x"}, exitUsage, "--epoch"},
		{"epoch zero", nil, []string{"force-release", name, "--epoch", "0"}, exitUsage, "epoch"},
		{"backend without a command", nil, []string{"backend"}, exitUsage, "'backend run' or 'backend serve'"},
		{"backend run without a key", nil, []string{"backend", "run", "--", "true"}, exitUsage, "--key"},
		{"backend run with a key with ..", nil, []string{"backend", "run", "--key", "app/../terraform.tfstate", "--", "true"}, exitUsage, `".."`},
		{"backend run with a key with a leading /", nil, []string{"backend", "run", "--key", "/app/terraform.tfstate", "--", "true"}, exitUsage, `"/"`},
		{"backend run without a bucket", c.without("S3LOCK_BUCKET"), []string{"backend", "run", "--key", "k", "--", "true"}, exitUsage, "S3LOCK_BUCKET"},
		{"backend run without --", nil, []string{"backend", "run", "--key", "k", "true"}, exitUsage, "'--'"},
		{"backend run with a name before --", nil, []string{"backend", "run", "--key", "k", "extra", "--", "true"}, exitUsage, "--key KEY"},
		{"backend run with a workspace with /", nil, []string{"backend", "run", "--key", "k", "--workspace", "a/b", "--", "true"}, exitUsage, "--workspace"},
		{"backend run with a missing bucket", nil, []string{"backend", "run", "--bucket", "no-such-bucket-here", "--key", "k", "--", "true"}, exitError, "no-such-bucket-here"},
		{"backend run on an unreachable store", nil, []string{"backend", "run", "--endpoint", "http://127.0.0.1:1", "--key", "k", "--", "true"}, exitError, "127.0.0.1:1"},
		{"backend run with wrong credentials", append(c.without("AWS_SECRET_ACCESS_KEY"), "AWS_SECRET_ACCESS_KEY=wrong"),
			[]string{"backend", "run", "--key", "k", "--", "true"}, exitError, "SignatureDoesNotMatch"},
		{"backend serve without credentials", nil, []string{"backend", "serve"}, exitUsage, envBackendPassword},
		{"backend serve beyond loopback", with(envBackendUsername+"=tf", envBackendPassword+"=0123456789abcdef"),
			[]string{"backend", "serve", "--listen", "0.0.0.0:7480"}, exitUsage, "--allow-remote"},
		{"backend serve beyond loopback without TLS", with(envBackendUsername+"=tf", envBackendPassword+"=0123456789abcdef"),
			[]string{"backend", "serve", "--listen", "0.0.0.0:7480", "--allow-remote"}, exitUsage, "--tls-cert"},
		{"backend serve with a short password", with(envBackendUsername+"=tf", envBackendPassword+"=short"),
			[]string{"backend", "serve"}, exitUsage, "at least 16"},
		{"backend serve with a missing credentials file", nil, []string{"backend", "serve", "--credentials-file", "/nonexistent/creds"}, exitUsage, "--credentials-file"},
		{"backend serve with a credentials file others can read", nil, []string{"backend", "serve", "--credentials-file", openCreds}, exitUsage, "chmod 600"},
		{"backend serve with a TLS certificate that does not load", with(envBackendUsername+"=tf", envBackendPassword+"=0123456789abcdef"),
			[]string{"backend", "serve", "--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, exitUsage, "--tls-cert"},
		{"backend run with a key that is a lock file", nil, []string{"backend", "run", "--key", "app/terraform.tfstate.tflock", "--", "true"}, exitUsage, "lock's object"},
		{"a holder from the environment with a bidirectional override", with(envHolder + "=deploy (job \u202e x)"),
			[]string{"acquire", "--wait", "0", name}, exitUsage, "--holder (or " + envHolder + ")"},
		{"backend run with a workspace ..", nil, []string{"backend", "run", "--key", "k", "--workspace", "..", "--", "true"}, exitUsage, "--workspace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = c.env
			}
			r := c.runWith(env, "", tc.args...)
			if r.code == 0 || r.code != tc.code {
				t.Fatalf("got %s, want exit %d", r, tc.code)
			}
			line := strings.TrimSuffix(r.stderr, "\n")
			if line == "" || strings.Contains(line, "\n") {
				t.Fatalf("stderr is not one line: %q", r.stderr)
			}
			if !strings.Contains(line, tc.says) {
				t.Fatalf("stderr %q lacks %q", line, tc.says)
			}
			// Only a usage error points to --help: on "no such bucket" or an
			// unreachable endpoint the hint pointed the wrong way. A refused
			// lock name (or prefix) says the rules instead, which no help lists.
			name := strings.Contains(line, "invalid lock name")
			if hint := strings.Contains(line, "--help'"); hint != (tc.code == exitUsage && !name) {
				t.Fatalf("stderr %q: --help hint %v; want it only on usage errors (exit %d) other than a refused name", line, hint, exitUsage)
			}
			if name && !strings.Contains(line, "(a lock name is a key path: ") {
				t.Fatalf("stderr %q: a refused name without the rules", line)
			}
			for _, kv := range env {
				if key, ok := strings.CutPrefix(kv, envSSECKey+"="); ok && strings.Contains(line, key) {
					t.Fatalf("stderr %q shows the SSE-C key", line)
				}
			}
			if strings.Contains(line, "panic") || r.stdout != "" {
				t.Fatalf("stdout %q, stderr %q", r.stdout, line)
			}
		})
	}
}

// The held lock and a timed-out wait are not usage errors: exit 3, no hint.
func TestHeldExitCode(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("held")
	lease, err := c.sdk.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	for _, tc := range []struct{ wait, says string }{
		{"0", fmt.Sprintf("lock %q is held by test-sdk (epoch 1) for at most", name)},
		{"1s", fmt.Sprintf("lock %q is still held by test-sdk (epoch 1) after waiting 1s (--wait)", name)},
	} {
		r := c.run("run", "--wait", tc.wait, name, "--", "true")
		if r.code != exitHeld || !strings.Contains(r.stderr, tc.says) || strings.Contains(r.stderr, "--help'") {
			t.Fatalf("--wait %s: %s; want exit %d saying %q", tc.wait, r, exitHeld, tc.says)
		}
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{
		{"--help"}, {"run", "--help"}, {"acquire", "--help"}, {"renew", "--help"}, {"release", "--help"},
		{"status", "--help"}, {"watch", "--help"}, {"force-release", "--help"}, {"verify", "--help"}, {"help", "run"},
		{"backend", "run", "--help"}, {"backend", "serve", "--help"},
	} {
		r := c.run(args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, "Exit codes:") {
			t.Errorf("s3lock %q: %s", args, r)
		}
	}
	if r := c.run(); r.code != exitUsage || !strings.Contains(r.stderr, "Usage:") || r.stdout != "" {
		t.Errorf("s3lock without a command: %s", r)
	}
}
