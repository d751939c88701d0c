package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// source is what a release records of its checkout.
type source struct {
	commit string    // abbreviated, for snapshot versions
	time   time.Time // the commit's, for archive entries
	dirty  bool      // uncommitted changes to tracked files
}

func readSource(ctx context.Context, repo string) (source, error) {
	var s source
	out, err := git(ctx, repo, "log", "-1", "--format=%h %ct", "--abbrev=12")
	if err != nil {
		return s, err
	}
	commit, ct, _ := strings.Cut(out, " ")
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return s, fmt.Errorf("git log in %s: commit time %q: %w", repo, ct, err)
	}
	s.commit, s.time = commit, time.Unix(secs, 0).UTC()
	status, err := git(ctx, repo, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return s, err
	}
	s.dirty = status != ""
	return s, nil
}

func git(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s (a release is built from a git checkout): %w: %s", strings.Join(args, " "), repo, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// goBuild builds pkg of repo for t into out, reproducibly, with version as
// main.version.
func goBuild(ctx context.Context, repo string, t target, pkg, version, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -buildid= -X main.version="+version,
		"-o", out, pkg)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOOS="+t.os, "GOARCH="+t.arch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w", pkg, t, err)
	}
	return nil
}

// sign writes path.sig, a binary detached signature by key (the form the
// Terraform Registry verifies against the key it publishes).
func sign(ctx context.Context, key, path string) error {
	cmd := exec.CommandContext(ctx, "gpg", "--batch", "--yes", "--local-user", key,
		"--output", path+".sig", "--detach-sign", path)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("signing %s with GnuPG key %s (is it in the keyring gpg uses, GNUPGHOME?): %w", path, key, err)
	}
	return nil
}
