package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// releaseVersion is the version the registry tests release and install.
const releaseVersion = "0.1.0"

// TestE2E_InstalledFromARegistry: the artifacts make release writes are
// what a provider registry serves. A registry on loopback speaks the
// provider registry protocol over HTTPS with a test CA; the CLI reaches it
// through a host block of its CLI configuration (for the registry host it
// resolves s3lock/s3lock at) and installs the provider as from the public
// registry: it verifies the signature of SHA256SUMS with the key the
// registry publishes and the zip against SHA256SUMS.
func TestE2E_InstalledFromARegistry(t *testing.T) {
	t.Parallel()
	h := setup(t)
	rel := buildSignedRelease(t, h.RepoRoot)

	t.Run("a signed release installs, and guarded applies run with it", func(t *testing.T) {
		t.Parallel()
		reg := serveRegistry(t, rel, nil)
		cli := reg.harness(t, h)
		ns := s3test.New(t)
		lock := ns.Name("e2e/registry")
		names := []string{"apply-1", "apply-2"}
		scenario := filepath.Join(h.RepoRoot, "examples", "scenarios", "local-demo")
		var dirs []string
		tl := concurrentRuns(t, cli, ns, lock, names,
			func(dir string) {
				if err := tfharness.CopyDir(dir, scenario); err != nil {
					t.Fatal(err)
				}
				dirs = append(dirs, dir)
			},
			[][]string{{"apply", "-auto-approve", "-no-color"}})
		checkTimeline(t, ns, lock, tl, len(names))
		if got := reg.downloads(); got != len(names) {
			t.Errorf("the registry served the provider's zip %d times; want %d (one init per working directory)", got, len(names))
		}
		for _, dir := range dirs {
			checkLockFile(t, h.CLI, filepath.Join(dir, ".terraform.lock.hcl"), rel)
		}
	})

	t.Run("a zip changed after SHA256SUMS was written is refused", func(t *testing.T) {
		t.Parallel()
		reg := serveRegistry(t, rel, func(name string, data []byte) []byte {
			if !strings.HasSuffix(name, ".zip") {
				return data
			}
			changed := slices.Clone(data)
			changed[len(changed)/2] ^= 0xff
			return changed
		})
		out := refusedInit(t, h, reg)
		t.Logf("init refused the changed zip:\n%s", out)
		if !regexp.MustCompile(`(?i)checksum`).MatchString(out) {
			t.Errorf("init failed, but not over the zip's checksum:\n%s", out)
		}
		if reg.downloads() == 0 {
			t.Error("the registry never served the zip: the test did not reach the checksum")
		}
	})

	t.Run("a SHA256SUMS signed by another key than the registry's is refused", func(t *testing.T) {
		t.Parallel()
		other := rel
		_, fpr, armor := newSigningKey(t)
		other.keyID, other.armor = fpr[len(fpr)-16:], armor
		out := refusedInit(t, h, serveRegistry(t, other, nil))
		t.Logf("init refused the signature:\n%s", out)
		if !regexp.MustCompile(`(?i)signature|signing key|openpgp`).MatchString(out) {
			t.Errorf("init failed, but not over the signature:\n%s", out)
		}
	})
}

// refusedInit runs init of the local-demo scenario through reg and
// returns its output, failing the test if init succeeded or wrote a lock
// file.
func refusedInit(t *testing.T, h *tfharness.Harness, reg *registry) string {
	t.Helper()
	cli := reg.harness(t, h)
	dir := t.TempDir()
	if err := tfharness.CopyDir(dir, filepath.Join(h.RepoRoot, "examples", "scenarios", "local-demo")); err != nil {
		t.Fatal(err)
	}
	out, err := cli.Init(t.Context(), dir)
	if err == nil {
		t.Fatalf("init installed the provider:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".terraform.lock.hcl")); err == nil {
		t.Error("a failed init wrote .terraform.lock.hcl")
	}
	return out
}

// signedRelease is a release of the provider for this machine, built by
// make release's tool and signed with a key made for the test.
type signedRelease struct {
	dir   string // the artifacts
	keyID string // the signing key's long ID
	armor string // its public key, ASCII-armored
	sums  map[string]string
}

// buildSignedRelease builds the release from a clone of root's commit
// tagged v<releaseVersion>: make release builds a real version only from a
// clean checkout of its tag (CONTRIBUTING.md, Releases), so the artifacts
// hold root's last commit, not changes not yet committed.
func buildSignedRelease(t *testing.T, root string) signedRelease {
	t.Helper()
	home, fpr, armor := newSigningKey(t)
	clone := filepath.Join(t.TempDir(), "repo")
	for _, args := range [][]string{
		{"clone", "--quiet", "--no-hardlinks", root, clone},
		{"-C", clone, "-c", "user.name=s3lock lab", "-c", "user.email=lab@s3lock.invalid", "tag", "v" + releaseVersion},
	} {
		if b, err := exec.CommandContext(t.Context(), "git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	out := t.TempDir()
	target := runtime.GOOS + "/" + runtime.GOARCH
	cmd := exec.CommandContext(t.Context(), "go", "-C", filepath.Join(clone, "tools", "release"), "run", ".",
		"-repo", clone, "-out", out, "-version", releaseVersion, "-targets", target, "-cli=false", "-sign", fpr)
	cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("building the release (tools/release): %v\n%s", err, b)
	}
	rel := signedRelease{dir: filepath.Join(out, releaseVersion), keyID: fpr[len(fpr)-16:], armor: armor}
	rel.sums = readSums(t, filepath.Join(rel.dir, "terraform-provider-s3lock_"+releaseVersion+"_SHA256SUMS"))
	return rel
}

// newSigningKey makes a GnuPG key in a keyring of its own and returns the
// keyring's directory, the key's fingerprint and its armored public key.
func newSigningKey(t *testing.T) (home, fingerprint, armor string) {
	t.Helper()
	// Not t.TempDir: gpg-agent's socket path must stay short.
	home, err := os.MkdirTemp("", "s3lock-gpg-") //nolint:usetesting // see above
	if err != nil {
		t.Fatal(err)
	}
	gpg := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "gpg", append([]string{"--batch"}, args...)...)
		cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %s (GnuPG signs the release; Debian's gnupg package): %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	t.Cleanup(func() {
		kill := exec.Command("gpgconf", "--kill", "gpg-agent")
		kill.Env = append(os.Environ(), "GNUPGHOME="+home)
		_ = kill.Run()
		_ = os.RemoveAll(home)
	})
	gpg("--passphrase", "", "--quick-gen-key", "s3lock release test <release-test@s3lock.invalid>", "rsa2048", "sign", "never")
	for line := range strings.Lines(gpg("--with-colons", "--list-secret-keys")) {
		if f := strings.Split(line, ":"); f[0] == "fpr" && len(f) > 9 {
			fingerprint = f[9]
			break
		}
	}
	if len(fingerprint) < 16 {
		t.Fatal("gpg listed no fingerprint for the key it made")
	}
	return home, fingerprint, gpg("--armor", "--export", fingerprint)
}

// readSums reads a SHA256SUMS file: file name -> hex SHA-256.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("%s: malformed line %q", path, sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

// zips returns the provider zips of rel's SHA256SUMS, by OS_ARCH.
func (rel signedRelease) zips() map[string]string {
	zips := map[string]string{}
	prefix := "terraform-provider-s3lock_" + releaseVersion + "_"
	for name := range rel.sums {
		if platform, ok := strings.CutSuffix(strings.TrimPrefix(name, prefix), ".zip"); ok && strings.HasPrefix(name, prefix) {
			zips[platform] = name
		}
	}
	return zips
}

// registry serves one release through the provider registry protocol.
type registry struct {
	srv    *httptest.Server
	caFile string
	mu     sync.Mutex
	zips   int // downloads of a zip
}

// serveRegistry serves rel on loopback over HTTPS; change, if not nil,
// rewrites a file's bytes as served (after SHA256SUMS was written).
func serveRegistry(t *testing.T, rel signedRelease, change func(name string, data []byte) []byte) *registry {
	t.Helper()
	r := &registry{}
	var manifest struct {
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		} `json:"metadata"`
	}
	data, err := os.ReadFile(filepath.Join(rel.dir, "terraform-provider-s3lock_"+releaseVersion+"_manifest.json"))
	if err == nil {
		err = json.Unmarshal(data, &manifest)
	}
	if err != nil || len(manifest.Metadata.ProtocolVersions) == 0 {
		t.Fatalf("the release's registry manifest names no protocol versions: %v", err)
	}
	protocols := manifest.Metadata.ProtocolVersions
	zips := rel.zips()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/providers/s3lock/s3lock/versions", func(w http.ResponseWriter, _ *http.Request) {
		type platform struct {
			OS   string `json:"os"`
			Arch string `json:"arch"`
		}
		var platforms []platform
		for p := range zips {
			goos, goarch, _ := strings.Cut(p, "_")
			platforms = append(platforms, platform{goos, goarch})
		}
		writeJSON(w, map[string]any{"versions": []map[string]any{
			{"version": releaseVersion, "protocols": protocols, "platforms": platforms},
		}})
	})
	mux.HandleFunc("GET /v1/providers/s3lock/s3lock/{version}/download/{os}/{arch}", func(w http.ResponseWriter, req *http.Request) {
		name, ok := zips[req.PathValue("os")+"_"+req.PathValue("arch")]
		if req.PathValue("version") != releaseVersion || !ok {
			http.NotFound(w, req)
			return
		}
		files := r.srv.URL + "/files/"
		sums := "terraform-provider-s3lock_" + releaseVersion + "_SHA256SUMS"
		writeJSON(w, map[string]any{
			"protocols": protocols, "os": req.PathValue("os"), "arch": req.PathValue("arch"),
			"filename": name, "download_url": files + name, "shasum": rel.sums[name],
			"shasums_url": files + sums, "shasums_signature_url": files + sums + ".sig",
			"signing_keys": map[string]any{"gpg_public_keys": []map[string]any{
				{"key_id": rel.keyID, "ascii_armor": rel.armor},
			}},
		})
	})
	mux.HandleFunc("GET /files/{name}", func(w http.ResponseWriter, req *http.Request) {
		name := req.PathValue("name")
		data, err := os.ReadFile(filepath.Join(rel.dir, filepath.Base(name)))
		if err != nil {
			http.NotFound(w, req)
			return
		}
		if change != nil {
			data = change(name, data)
		}
		if strings.HasSuffix(name, ".zip") && req.Method == http.MethodGet { // the pattern matches HEAD too
			r.mu.Lock()
			r.zips++
			r.mu.Unlock()
		}
		_, _ = w.Write(data)
	})
	r.srv = httptest.NewTLSServer(mux)
	t.Cleanup(r.srv.Close)
	r.caFile = filepath.Join(t.TempDir(), "registry-ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (r *registry) downloads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.zips
}

// harness is h with a CLI configuration that reaches the registry as a
// user's can: a host block for the registry host the CLI resolves
// s3lock/s3lock at, and the test CA trusted through SSL_CERT_FILE (which
// Go programs on Linux and macOS read). No mirror is configured.
func (r *registry) harness(t *testing.T, h *tfharness.Harness) *tfharness.Harness {
	t.Helper()
	cli := *h
	cli.CLIConfig = filepath.Join(t.TempDir(), "terraformrc")
	cfg := fmt.Sprintf(`host %q {
  services = {
    "providers.v1" = "%s/v1/providers/"
  }
}
`, h.CLI.RegistryHost(), r.srv.URL)
	if err := os.WriteFile(cli.CLIConfig, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cli.Env = append(slices.Clone(h.Env), "SSL_CERT_FILE="+r.caFile, "TF_PLUGIN_CACHE_DIR=")
	return &cli
}

// checkLockFile checks that init recorded the release in the dependency
// lock file: version 0.1.0 and, as zh: hashes, exactly the SHA-256 sums of
// the signed SHA256SUMS (the CLI records one for each file it lists: the
// zips and the manifest), which include the installed zip's.
func checkLockFile(t *testing.T, cli tfharness.CLI, path string, rel signedRelease) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("init wrote no dependency lock file: %v", err)
	}
	text := string(data)
	block := regexp.MustCompile(`(?s)provider "` + regexp.QuoteMeta(cli.ProviderSource()) + `" \{.*?\n\}`).FindString(text)
	if block == "" {
		t.Fatalf("%s has no entry for %s:\n%s", path, cli.ProviderSource(), text)
	}
	if !regexp.MustCompile(`\n\s*version\s*=\s*"` + regexp.QuoteMeta(releaseVersion) + `"`).MatchString(block) {
		t.Errorf("%s records another version than %s:\n%s", path, releaseVersion, block)
	}
	var got, want []string
	for _, m := range regexp.MustCompile(`"zh:([0-9a-f]{64})"`).FindAllStringSubmatch(block, -1) {
		got = append(got, m[1])
	}
	for _, sum := range rel.sums {
		want = append(want, sum)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s records zh: hashes %v; SHA256SUMS has %v:\n%s", path, got, want, block)
	}
	if !strings.Contains(block, `"h1:`) {
		t.Errorf("%s records no h1: hash of the installed package:\n%s", path, block)
	}
}
