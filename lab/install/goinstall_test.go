package install_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// modulePath is the main module's path: what users go install from.
const modulePath = "github.com/s3lock/terraform-provider-s3lock"

// TestGoInstall_ATaggedVersionInstallsAndSaysItsVersion: the checkout's
// committed tree, published as v0.1.0 on a module proxy (a file-based one,
// as a tag on the public proxy would be), installs with `go install
// …@v0.1.0` (which refuses a module with replace directives), and both
// binaries report v0.1.0, read from the build info: no -ldflags set it.
func TestGoInstall_ATaggedVersionInstallsAndSaysItsVersion(t *testing.T) {
	t.Parallel()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const version = "v0.1.0"
	proxy := publish(t, root, version)
	gobin := t.TempDir()
	for _, pkg := range []string{modulePath + "/cmd/s3lock", modulePath} {
		goInstall(t, proxy, gobin, pkg+"@"+version)
	}
	for bin, arg := range map[string]string{"s3lock": "--version", "terraform-provider-s3lock": "-version"} {
		out, err := exec.CommandContext(t.Context(), filepath.Join(gobin, bin), arg).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", bin, arg, err, out)
		}
		if got := strings.Fields(string(out)); len(got) == 0 || got[len(got)-1] != version {
			t.Errorf("%s %s printed %q; want it to end in %s", bin, arg, out, version)
		}
	}
}

// publish writes a file-based module proxy (GOPROXY=file://…) that serves
// the committed tree of root (git HEAD) as version of the main module, and
// returns its directory.
func publish(t *testing.T, root, version string) string {
	t.Helper()
	proxy := t.TempDir()
	dir := filepath.Join(proxy, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zip bytes.Buffer
	m := module.Version{Path: modulePath, Version: version}
	if err := modzip.CreateFromVCS(&zip, m, root, "HEAD", ""); err != nil {
		t.Fatalf("making the module zip of %s at HEAD: %v", root, err)
	}
	gomod, err := exec.CommandContext(t.Context(), "git", "-C", root, "show", "HEAD:go.mod").Output()
	if err != nil {
		t.Fatalf("git show HEAD:go.mod: %v", err)
	}
	info, err := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod, version + ".zip": zip.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proxy
}

// goInstall runs go install of pkgAtVersion into gobin from proxy, with a
// module cache of its own (so no earlier v0.1.0 is reused); the
// dependencies come from this machine's module cache, else the configured
// proxy. The build is -trimpath without cgo, as release builds are, so it
// shares their compiled dependencies in the build cache.
func goInstall(t *testing.T, proxy, gobin, pkgAtVersion string) {
	t.Helper()
	goenv := func(name string) string {
		out, err := exec.CommandContext(t.Context(), "go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	proxies := "file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(goenv("GOMODCACHE"), "cache", "download"))
	if p := goenv("GOPROXY"); p != "" && p != "off" {
		proxies += "," + p
	}
	modcache := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "install", "-trimpath", pkgAtVersion)
	cmd.Dir = t.TempDir() // outside any module
	cmd.Env = append(os.Environ(),
		"GOBIN="+gobin, "GOPROXY="+proxies, "GOMODCACHE="+modcache, "GOFLAGS=-modcacherw",
		"GONOSUMDB="+modulePath, "GOPRIVATE=", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go install %s: %v\n%s", pkgAtVersion, err, out)
	}
	if len(out) > 0 {
		t.Logf("go install %s:\n%s", pkgAtVersion, out)
	}
}
