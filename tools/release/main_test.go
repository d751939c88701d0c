package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// fakeRepo is a git checkout shaped like s3lock's, small enough to
// release in seconds: a CLI at ./cmd/s3lock whose bytes change if a
// GOFLAGS=-tags=evil from the builder's environment reached its build.
type fakeRepo struct{ dir string }

func newFakeRepo(t *testing.T) *fakeRepo {
	t.Helper()
	r := &fakeRepo{dir: t.TempDir()}
	r.write(t, "go.mod", "module example.com/fake\n\ngo 1.26\n\ntoolchain "+runtime.Version()+"\n")
	r.write(t, "LICENSE", "license\n")
	r.write(t, "cmd/s3lock/README.md", "readme\n")
	r.write(t, "cmd/s3lock/main.go", "package main\n\nvar version = \"dev\"\n\nfunc main() { println(version) }\n")
	r.write(t, "cmd/s3lock/evil.go", "//go:build evil\n\npackage main\n\nfunc init() { version = \"evil\" }\n")
	r.write(t, "pipelines/install.sh", "#!/bin/sh\n")
	r.write(t, templatePath, ".s3lock:\n  variables:\n    S3LOCK_CHECKSUMS_SHA256: "+strings.Repeat("0", 64)+" # pins\n")
	r.git(t, "init", "-q")
	r.commit(t, "the source")
	return r
}

func (r *fakeRepo) write(t *testing.T, name, content string) {
	t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *fakeRepo) git(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", append([]string{"-C", r.dir, "-c", "user.name=release test",
		"-c", "user.email=release@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (r *fakeRepo) commit(t *testing.T, msg string) {
	t.Helper()
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "--allow-empty", "-m", msg)
}

// release runs the tool's release on the checkout: the CLI only, for
// linux/amd64 (archive and image), into a fresh directory.
func (r *fakeRepo) release(t *testing.T, cfg config) (string, error) {
	t.Helper()
	cfg.repo, cfg.out, cfg.cli = r.dir, t.TempDir(), true
	cfg.only = []target{{"linux", "amd64"}}
	if cfg.caFile == "" && !snapshot(cfg.version) && !cfg.pin {
		cfg.caFile = r.caBundle(t)
	}
	return release(t.Context(), cfg)
}

// caBundle is a stand-in CA bundle: the image only copies it.
func (r *fakeRepo) caBundle(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameFiles fails unless directories a and b hold the same files with
// the same bytes.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range entries {
			n = append(n, e.Name())
		}
		return n
	}
	if na, nb := names(a), names(b); !slices.Equal(na, nb) {
		t.Fatalf("the releases hold different files: %q and %q", na, nb)
	}
	for _, n := range names(a) {
		da, _ := os.ReadFile(filepath.Join(a, n))
		db, _ := os.ReadFile(filepath.Join(b, n))
		if string(da) != string(db) {
			t.Errorf("%s differs between the two releases", n)
		}
	}
}

// TestRelease_BuildersEnvironmentDoesNotChangeTheBytes: GOFLAGS,
// GOAMD64, GOEXPERIMENT and cgo set in the builder's environment (or a
// go.work around the checkout) reach no release build.
func TestRelease_BuildersEnvironmentDoesNotChangeTheBytes(t *testing.T) {
	r := newFakeRepo(t)
	plain, err := r.release(t, config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLAGS", "-tags=evil")
	t.Setenv("GOAMD64", "v3")
	t.Setenv("GOEXPERIMENT", "nosynchashtriemap")
	t.Setenv("CGO_ENABLED", "1")
	t.Setenv("GOWORK", filepath.Join(t.TempDir(), "go.work"))
	dirty, err := r.release(t, config{})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, plain, dirty)
}

func TestBuildEnv_IsWhollyTheRelease(t *testing.T) {
	t.Setenv("GOFLAGS", "-tags=evil")
	t.Setenv("GOAMD64", "v3")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	passed := map[string]string{"GOCACHE": "/cache", "GOMODCACHE": "/mod"}
	env := buildEnv(passed, "go1.26.8", target{"linux", "amd64"})
	want := map[string]string{"GOFLAGS": "", "GOAMD64": "v1", "GOTOOLCHAIN": "go1.26.8", "GOENV": "off",
		"GOWORK": "off", "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": "amd64", "GOCACHE": "/cache"}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("buildEnv sets %s twice", k)
		}
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("buildEnv: %s=%q; want %q", k, got[k], v)
		}
	}
	if _, ok := got["AWS_SECRET_ACCESS_KEY"]; ok {
		t.Error("buildEnv passes the builder's whole environment (AWS_SECRET_ACCESS_KEY)")
	}
}

// TestRelease_PinThenTagThenRelease is a release as CONTRIBUTING.md
// tells it: a clean untagged commit is refused, -pin writes the CLI's
// pins, the commit that adds them is tagged, and the release built there
// is the pinned bytes (the pins' commit changes neither the binary nor
// the archives' time).
func TestRelease_PinThenTagThenRelease(t *testing.T) {
	r := newFakeRepo(t)
	if _, err := r.release(t, config{version: "1.2.3"}); err == nil || !strings.Contains(err.Error(), "not tagged v1.2.3") {
		t.Fatalf("a release from an untagged commit: %v; want refused as not tagged", err)
	}
	if _, err := r.release(t, config{version: "1.2.3", pin: true}); err != nil {
		t.Fatal(err)
	}
	_, pins, err := readPins(filepath.Join(r.dir, pinsPath))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range pins {
		files = append(files, p.version+" "+p.target.String()+" "+p.file)
	}
	if want := []string{"1.2.3 linux/amd64 s3lock_1.2.3_linux_amd64.tar.gz", "1.2.3 linux/amd64 s3lock"}; !slices.Equal(files, want) {
		t.Fatalf("-pin pinned %q; want %q", files, want)
	}
	pinsData, err := os.ReadFile(filepath.Join(r.dir, pinsPath))
	if err != nil {
		t.Fatal(err)
	}
	template, err := os.ReadFile(filepath.Join(r.dir, templatePath))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkTemplatePins(templatePath, template, pinsData); err != nil || !strings.HasSuffix(string(template), " # pins\n") {
		t.Fatalf("-pin left the template %q: %v; want it to pin the pins, its comment kept", template, err)
	}
	r.commit(t, "pin 1.2.3")
	r.git(t, "tag", "v1.2.3")
	dir, err := r.release(t, config{version: "1.2.3"})
	if err != nil {
		t.Fatalf("the release at the tag of its pins: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s3lock_1.2.3_SHA256SUMS")); err != nil {
		t.Error(err)
	}

	// A change after pinning builds other bytes: refused.
	r.write(t, "cmd/s3lock/main.go", "package main\n\nvar version = \"changed\"\n\nfunc main() { println(version) }\n")
	r.commit(t, "a change")
	r.git(t, "tag", "-f", "v1.2.3")
	if _, err := r.release(t, config{version: "1.2.3"}); err == nil || !strings.Contains(err.Error(), "does not build the pinned bytes") {
		t.Errorf("a release whose archive is not the pinned one: %v; want refused", err)
	}
}

func TestRelease_RefusesADirtyCheckout(t *testing.T) {
	r := newFakeRepo(t)
	r.git(t, "tag", "v1.2.3")
	r.write(t, "cmd/s3lock/extra.go", "package main\n")
	for _, pin := range []bool{false, true} {
		if _, err := r.release(t, config{version: "1.2.3", pin: pin}); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
			t.Errorf("a release (-pin=%v) from a checkout with an untracked Go file: %v; want refused", pin, err)
		}
	}
	if _, err := r.release(t, config{}); err != nil {
		t.Errorf("a snapshot of a dirty checkout: %v; want built", err)
	}
}

func TestRelease_ImageNeedsItsCABundleNamed(t *testing.T) {
	r := newFakeRepo(t)
	r.git(t, "tag", "v1.2.3")
	err := checkConfig(&config{version: "1.2.3", cli: true}, source{tags: []string{"v1.2.3"}}, r.dir, "1.2.3")
	if err == nil || !strings.Contains(err.Error(), "-ca-bundle") {
		t.Errorf("a release's image without -ca-bundle: %v; want refused", err)
	}
	cfg := config{cli: true}
	if err := checkConfig(&cfg, source{}, r.dir, "0.0.0-snapshot.abc"); err != nil || cfg.caFile != machineCAFile {
		t.Errorf("a snapshot without -ca-bundle: %v, bundle %q; want the machine's", err, cfg.caFile)
	}
}

func TestPins_ReadAndWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checksums.txt")
	sum := strings.Repeat("ab", 32)
	first := []pin{{"0.1.0", target{"linux", "amd64"}, sum, "s3lock_0.1.0_linux_amd64.tar.gz"}}
	if err := writePins(path, first); err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("cd", 32)
	if err := writePins(path, []pin{{"0.2.0", target{"linux", "amd64"}, sum, "s3lock"}, {"0.1.0", target{"linux", "amd64"}, other, "s3lock_0.1.0_linux_amd64.tar.gz"}}); err != nil {
		t.Fatal(err)
	}
	header, pins, err := readPins(path)
	if err != nil {
		t.Fatal(err)
	}
	if header != pinsHeader || len(pins) != 2 || pins[1].sum != other {
		t.Errorf("after pinning 0.1.0 again: header %q, pins %v; want the header kept and 0.1.0's line replaced", header, pins)
	}
	if err := os.WriteFile(path, []byte("0.1.0 linux/amd64 nothex s3lock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readPins(path); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("a malformed line: %v; want an error naming the line", err)
	}
}

// TestRelease_RefusesPinsNotCommittedAtItsTag: the pins a release is
// checked against are the ones committed at its tag, the ones users of
// that commit get: pins written by -pin but not committed make the
// checkout dirty, a file the index is told to ignore is not read, and
// -pins names no other file.
func TestRelease_RefusesPinsNotCommittedAtItsTag(t *testing.T) {
	r := newFakeRepo(t)
	r.git(t, "tag", "v1.2.3")
	if _, err := r.release(t, config{version: "1.2.3", pin: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.release(t, config{version: "1.2.3"}); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
		t.Fatalf("a release at its tag with its pins written but not committed: %v; want refused as uncommitted", err)
	}

	// Pins committed at the tag that are not the build's, and the right
	// ones in the working tree, hidden from git status.
	pins := filepath.Join(r.dir, pinsPath)
	good, err := os.ReadFile(pins)
	if err != nil {
		t.Fatal(err)
	}
	_, built, err := parsePins(pinsPath, good)
	if err != nil {
		t.Fatal(err)
	}
	for i := range built {
		built[i].sum = strings.Repeat("0", 64)
	}
	if err := os.Remove(pins); err != nil {
		t.Fatal(err)
	}
	if err := writePins(pins, built); err != nil {
		t.Fatal(err)
	}
	if err := writeTemplatePins(filepath.Join(r.dir, templatePath), pins); err != nil {
		t.Fatal(err)
	}
	r.commit(t, "wrong pins")
	r.git(t, "tag", "-f", "v1.2.3")
	r.git(t, "update-index", "--skip-worktree", pinsPath)
	if err := os.WriteFile(pins, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.release(t, config{version: "1.2.3"}); err == nil || !strings.Contains(err.Error(), "does not build the pinned bytes") {
		t.Errorf("a release whose committed pins are not its archives (the right ones only in the working tree): %v; want refused", err)
	}

	alt := filepath.Join(t.TempDir(), "checksums.txt")
	if err := os.WriteFile(alt, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.release(t, config{version: "1.2.3", pins: alt}); err == nil || !strings.Contains(err.Error(), "-pins") {
		t.Errorf("a release with -pins naming another file: %v; want refused", err)
	}
	if _, err := r.release(t, config{version: "1.2.3", pin: true, pins: alt}); err == nil || !strings.Contains(err.Error(), "-pins") {
		t.Errorf("-pin of a release with -pins naming another file: %v; want refused", err)
	}
}

// TestRelease_RefusesATemplateThatDoesNotPinItsPins: the GitLab CI
// template at the tag must pin the SHA-256 of the pins at the tag, or its
// jobs would refuse the release.
func TestRelease_RefusesATemplateThatDoesNotPinItsPins(t *testing.T) {
	r := newFakeRepo(t)
	if _, err := r.release(t, config{version: "1.2.3", pin: true}); err != nil {
		t.Fatal(err)
	}
	r.git(t, "checkout", "--", templatePath)
	r.commit(t, "pin 1.2.3, the template not")
	r.git(t, "tag", "v1.2.3")
	if _, err := r.release(t, config{version: "1.2.3"}); err == nil || !strings.Contains(err.Error(), "would refuse") {
		t.Errorf("a release whose template does not pin its pins: %v; want refused", err)
	}
}

// TestPins_UppercaseHashesMatch: a SHA-256 is hex in either case, in the
// pins file as in the template.
func TestPins_UppercaseHashesMatch(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	built := []pin{{"0.1.0", target{"linux", "amd64"}, sum, "s3lock"}}
	data := []byte("0.1.0 linux/amd64 " + strings.ToUpper(sum) + " s3lock\n")
	if err := checkPins("checksums.txt", data, built); err != nil {
		t.Errorf("a pin in upper case: %v; want it to match", err)
	}
	h := sha256.Sum256(data)
	template := []byte("    S3LOCK_CHECKSUMS_SHA256: " + strings.ToUpper(hex.EncodeToString(h[:])) + "\n")
	if err := checkTemplatePins("template", template, data); err != nil {
		t.Errorf("the template's pin in upper case: %v; want it to match", err)
	}
}
