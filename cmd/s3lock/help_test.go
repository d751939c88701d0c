package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// rootHelpLines bounds the top-level help: a page a person reads (it was
// about 150 lines, every connection flag and its variables included).
const rootHelpLines = 50

// TestHelp_TopLevelIsShort: s3lock --help fits a screen, names every command
// and help topic, and sends the reader on for the rest.
func TestHelp_TopLevelIsShort(t *testing.T) {
	t.Parallel()
	out := execHelp(t, "--help")
	if n := strings.Count(out, "\n"); n > rootHelpLines {
		t.Errorf("s3lock --help has %d lines; want at most %d:\n%s", n, rootHelpLines, out)
	}
	root := newApp(nil, nil, nil).rootCommand()
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() || c.Annotations[topicAnnotation] != "" {
			if !strings.Contains(out, "\n  "+c.Name()+" ") {
				t.Errorf("s3lock --help does not list %s:\n%s", c.Name(), out)
			}
		}
	}
	for _, want := range []string{"--bucket", "--endpoint", "--use-path-style", "make local", "s3lock help TOPIC"} {
		if !strings.Contains(out, want) {
			t.Errorf("s3lock --help does not say %q:\n%s", want, out)
		}
	}
}

// TestHelp_Topics: the details the top-level help left out are one command
// away: 's3lock help environment' names the variable of every flag that has
// one, and 's3lock help exit-codes' lists the exit codes.
func TestHelp_Topics(t *testing.T) {
	t.Parallel()
	env := execHelp(t, "help", "environment")
	envName := regexp.MustCompile(`\(env ([A-Z0-9_]+)`)
	newApp(nil, nil, nil).rootCommand().PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if m := envName.FindStringSubmatch(f.Usage); m != nil && !strings.Contains(env, m[1]) {
			t.Errorf("s3lock help environment does not name %s (--%s)", m[1], f.Name)
		}
	})
	if codes := execHelp(t, "help", "exit-codes"); !strings.HasPrefix(codes, exitCodesHelp) || strings.Contains(codes, "Global Flags") {
		t.Errorf("s3lock help exit-codes:\n%s\nwant the exit codes alone", codes)
	}
}

// execHelp runs s3lock in this process and returns its stdout, failing the
// test unless it exits 0.
func execHelp(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := newApp(strings.NewReader(""), &stdout, &stderr).execute(args); code != 0 {
		t.Fatalf("s3lock %q: exit %d\n%s", args, code, stderr.String())
	}
	return stdout.String()
}

// TestHelp_UnknownTopicIsAUsageError: `s3lock help bogus` printed the whole
// help and exited 0 (a new user, issue 36); it says there is no such command
// or topic and exits 2, as `s3lock bogus` does.
func TestHelp_UnknownTopicIsAUsageError(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("help", "bogus")
	if r.code != exitUsage || !strings.Contains(r.stderr, `no command or help topic "bogus"`) || r.stdout != "" {
		t.Fatalf("s3lock help bogus: %s; want exit %d naming the topic", r, exitUsage)
	}
	if r := c.run("help", "run"); r.code != 0 || !strings.Contains(r.stdout, "Acquire the lock NAME") {
		t.Fatalf("s3lock help run: %s", r)
	}
}
