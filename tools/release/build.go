package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pinsPath is where a checkout pins the SHA-256 of its releases' CLI
// archives (pins.go), relative to its root, and templatePath the GitLab CI
// template, which pins pinsPath's own SHA-256 (S3LOCK_CHECKSUMS_SHA256).
// They are the files -pin writes after the archives' hashes are taken:
// they are left out of the tree's time, and, while pinning, of what counts
// as uncommitted. A release counts them as any other file: its pins are
// the ones committed at its tag.
const (
	pinsPath     = "pipelines/checksums.txt"
	templatePath = "pipelines/gitlab/s3lock.gitlab-ci.yml"
)

// source is what a release records of its checkout.
type source struct {
	commit    string    // abbreviated, for snapshot versions
	time      time.Time // of the newest commit that changed more than the pins, for archive entries
	dirty     string    // uncommitted changes (git status); "" = none
	dirtyCode string    // the same, pinsPath and templatePath aside (what -pin may leave)
	tags      []string  // the tags of the commit
	toolchain string    // go.mod's toolchain line, like go1.26.8
}

// outsidePins is a git pathspec of everything but pinsPath and
// templatePath.
var outsidePins = []string{"--", ".", ":(exclude)" + pinsPath, ":(exclude)" + templatePath}

func readSource(ctx context.Context, repo string) (source, error) {
	var s source
	commit, err := git(ctx, repo, "log", "-1", "--format=%h", "--abbrev=12")
	if err != nil {
		return s, err
	}
	// The archives' time is not the commit's: committing the pins of a
	// release (pinsPath) must not change what those pins are of.
	ct, err := git(ctx, repo, append([]string{"log", "-1", "--format=%ct"}, outsidePins...)...)
	if err != nil {
		return s, err
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return s, fmt.Errorf("git log in %s: commit time %q: %w", repo, ct, err)
	}
	s.commit, s.time = commit, time.Unix(secs, 0).UTC()
	if s.dirty, err = git(ctx, repo, "status", "--porcelain"); err != nil {
		return s, err
	}
	if s.dirtyCode, err = git(ctx, repo, append([]string{"status", "--porcelain"}, outsidePins...)...); err != nil {
		return s, err
	}
	tags, err := git(ctx, repo, "tag", "--points-at", "HEAD")
	if err != nil {
		return s, err
	}
	s.tags = strings.Fields(tags)
	s.toolchain, err = readToolchain(filepath.Join(repo, "go.mod"))
	return s, err
}

// releasable says why version may not be released from s ("" = it may):
// a release is built from a clean checkout at its tag, vVERSION, pins
// included. pinning (-pin) comes before the tag, and may find the pins of
// an earlier -pin uncommitted: the pins are committed, and that commit
// tagged.
func (s source) releasable(version string, pinning bool) error {
	dirty := s.dirty
	if pinning {
		dirty = s.dirtyCode
	}
	if dirty != "" {
		return fmt.Errorf("the checkout has uncommitted changes, and a release (%s) is built from a commit, its pins (%s) too: "+
			"commit or remove them, or build a snapshot (no -version):\n%s", version, pinsPath, dirty)
	}
	if !pinning && !slices.Contains(s.tags, "v"+version) {
		return fmt.Errorf("the checkout's commit %s is not tagged v%s (its tags: %q): a release is built from its tag; "+
			"pin it (-pin), commit %s, tag that commit v%s and build there (CONTRIBUTING.md, Releases)",
			s.commit, version, s.tags, pinsPath, version)
	}
	return nil
}

// snapshot says whether version is one no release has: 0.0.0-anything (the
// default, 0.0.0-snapshot.COMMIT, and the lab's). Those build from any
// checkout.
func snapshot(version string) bool { return strings.HasPrefix(version, "0.0.0-") }

// readToolchain returns the toolchain line of a go.mod (go1.26.8): the Go
// that builds the release, whatever Go runs this program.
func readToolchain(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "toolchain" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s has no toolchain line: a release is built by the Go it names (like toolchain go1.26.8)", gomod)
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

// gitFile returns the bytes of path as committed at rev.
func gitFile(ctx context.Context, repo, rev, path string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "show", rev+":"+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git show %s:%s in %s (a release's pins are the ones committed at its tag): %w: %s",
			rev, path, repo, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// goEnvPassed are the settings of the builder's Go a release build keeps:
// where its caches are and where modules come from (go.sum pins what they
// hold). Everything else that changes the bytes is set by buildEnv.
var goEnvPassed = []string{"GOCACHE", "GOMODCACHE", "GOPROXY", "GOSUMDB", "GOPRIVATE", "GONOSUMDB", "GONOPROXY"}

// goEnv reads goEnvPassed from the builder's Go (its environment and its
// go env file).
func goEnv(ctx context.Context) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"env", "-json"}, goEnvPassed...)...)
	// Settings that a release build does not take must not stop the query.
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOEXPERIMENT=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("go env -json: %w", err)
	}
	return env, nil
}

// buildEnv is the whole environment of a release's go build for t: none
// of the builder's settings that change the bytes (GOFLAGS, GOAMD64,
// GOEXPERIMENT, a go env file, a go.work, cgo) reach it. toolchain is
// go.mod's: GOTOOLCHAIN makes the go command run exactly that Go,
// fetching it from GOPROXY if the builder has another.
func buildEnv(passed map[string]string, toolchain string, t target) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"GOENV=off", "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=" + toolchain,
		"GOOS=" + t.os, "GOARCH=" + t.arch, "CGO_ENABLED=0",
		// The defaults of Go 1.26, written out: the builder's would win.
		"GOAMD64=v1", "GOARM64=v8.0", "GOARM=7", "GO386=sse2",
		"GOEXPERIMENT=", "GOFIPS140=off",
	}
	for _, k := range goEnvPassed {
		env = append(env, k+"="+passed[k])
	}
	return env
}

// goBuild builds pkg of the checkout for t into out, reproducibly, with
// vVERSION as main.version, and returns out's SHA-256. Without VCS
// stamping (-buildvcs=false), the binary records no commit: the commit
// that adds a release's pins builds the bytes they pin.
func (b *builder) goBuild(ctx context.Context, t target, pkg, out string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version=v"+b.version,
		"-o", out, pkg)
	cmd.Dir = b.repo
	cmd.Env = buildEnv(b.goEnv, b.toolchain, t)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s for %s (%s): %w", pkg, t, b.toolchain, err)
	}
	return fileSum(out)
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
