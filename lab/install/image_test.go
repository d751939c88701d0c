package install_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// TestImage_TheCLIsImageRunsVerifyAsNonRoot: make release's image of the
// CLI is an OCI image layout whose blobs match their digests; for this
// machine's architecture it is FROM scratch with one layer, runs as a user
// that is not root, with s3lock as its entrypoint and a CA bundle; and the
// s3lock in it, run as the image's entrypoint would be, reports the
// release's version and passes `s3lock verify` against versitygw.
//
// It runs the image twice: unpacked, its entrypoint run directly with the
// image's environment (what any machine can do); and, where podman is
// installed (.ci/run installs it, and runc, from Debian's packages), loaded
// into podman and run by a real OCI runtime.
func TestImage_TheCLIsImageRunsVerifyAsNonRoot(t *testing.T) {
	t.Parallel()
	dir := cliRelease(t)
	path := filepath.Join(dir, "s3lock_"+releaseVersion+"_image.tar")
	checkSum(t, filepath.Join(dir, "s3lock_"+releaseVersion+"_SHA256SUMS"), path)
	img := readLayout(t, path)

	m := img.manifestFor(t, "linux", runtime.GOARCH)
	var cfg imageConfig
	img.json(t, m.Config.Digest, &cfg)
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("the manifest for linux/%s has a config for %s/%s", runtime.GOARCH, cfg.OS, cfg.Architecture)
	}
	if u := cfg.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root") {
		t.Errorf("the image runs as user %q; want a user that is not root", u)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/s3lock"}) {
		t.Errorf("the image's entrypoint is %q; want [/usr/local/bin/s3lock]", cfg.Config.Entrypoint)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != releaseVersion {
		t.Errorf("the image's version label is %q; want %s", got, releaseVersion)
	}
	if len(m.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 {
		t.Fatalf("the image has %d layers (%d diff IDs); want one on scratch", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	rootfs := img.unpack(t, m.Layers[0].Digest, cfg.RootFS.DiffIDs[0])
	for _, f := range []string{"usr/local/bin/s3lock", "etc/ssl/certs/ca-certificates.crt", "etc/passwd"} {
		if _, err := os.Stat(filepath.Join(rootfs, f)); err != nil {
			t.Errorf("the image lacks /%s: %v", f, err)
		}
	}

	entry := filepath.Join(rootfs, cfg.Config.Entrypoint[0])
	env := imageEnv(rootfs, cfg.Config.Env)
	version, err := run(t, entry, env, "--version")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(version), "v"+releaseVersion) {
		t.Errorf("s3lock --version in the image: %q, %v; want v%s", version, err, releaseVersion)
	}
	ns := s3test.New(t)
	tg := ns.Target
	env = append(env, "S3LOCK_ENDPOINT="+tg.Endpoint, "S3LOCK_BUCKET="+ns.Bucket, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID="+tg.AccessKey, "AWS_SECRET_ACCESS_KEY="+tg.SecretKey, "AWS_REGION="+tg.Region,
		"AWS_EC2_METADATA_DISABLED=true")
	if out, err := run(t, entry, env, "verify", "--prefix", ns.Name("image-verify/")); err != nil {
		t.Errorf("s3lock verify in the image against versitygw: %v\n%s", err, out)
	}

	t.Run("in podman", func(t *testing.T) {
		if _, err := exec.LookPath("podman"); err != nil {
			t.Skip("podman is not installed (apt-get install podman runc; .ci/run does)")
		}
		image := podmanLoad(t, path)
		if out, err := podman(t, "run", "--rm", image, "--version"); err != nil || !strings.HasSuffix(strings.TrimSpace(out), "v"+releaseVersion) {
			t.Errorf("podman run %s --version: %q, %v; want v%s", image, out, err, releaseVersion)
		}
		if out, err := podman(t, "run", "--rm", "--entrypoint", "/bin/id", image); err == nil {
			t.Errorf("the image has /bin/id (%q): want nothing but s3lock and its files", out)
		}
		args := []string{"run", "--rm", "--network", "host"}
		for _, kv := range []string{"S3LOCK_ENDPOINT=" + tg.Endpoint, "S3LOCK_BUCKET=" + ns.Bucket, "S3LOCK_USE_PATH_STYLE=true",
			"AWS_ACCESS_KEY_ID=" + tg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + tg.SecretKey, "AWS_REGION=" + tg.Region, "AWS_EC2_METADATA_DISABLED=true"} {
			args = append(args, "--env", kv)
		}
		args = append(args, image, "verify", "--prefix", ns.Name("podman-verify/"))
		if out, err := podman(t, args...); err != nil {
			t.Errorf("s3lock verify in podman against versitygw: %v\n%s", err, out)
		}
	})
}

// podmanLoad loads the image archive into podman under a name of its own
// (removed when the test ends) and returns the name.
func podmanLoad(t *testing.T, path string) string {
	t.Helper()
	out, err := podman(t, "load", "--quiet", "--input", path)
	if err != nil {
		t.Fatalf("podman load %s: %v\n%s", path, err, out)
	}
	loaded := strings.TrimSpace(out[strings.LastIndex(out, ":")+1:])
	if i := strings.Index(out, "Loaded image: "); i >= 0 {
		loaded = strings.TrimSpace(strings.SplitN(out[i+len("Loaded image: "):], "\n", 2)[0])
	}
	if loaded != "localhost/s3lock:"+releaseVersion {
		t.Errorf("podman loaded the image as %q; want localhost/s3lock:%s (the layout's ref.name)", loaded, releaseVersion)
	}
	name := "localhost/s3lock-test:" + s3test.RandomHex(4)
	if out, err := podman(t, "tag", loaded, name); err != nil {
		t.Fatalf("podman tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = podman(t, "rmi", name) })
	return name
}

// podman runs podman as this machine needs: a container whose cgroups are
// in hybrid mode, where crun refuses to start containers and runc, with
// cgroupfs, does; and ulimits at most the machine's (podman's defaults
// raise them, which a container without CAP_SYS_RESOURCE may not).
func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	global := []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}
	if args[0] == "run" {
		args = append([]string{"run", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}, args[1:]...)
	}
	cmd := exec.CommandContext(t.Context(), "podman", append(global, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// imageEnv is the environment the image gives its entrypoint, with its
// paths moved under rootfs (where the test unpacked it).
func imageEnv(rootfs string, env []string) []string {
	out := []string{"PATH=" + os.Getenv("PATH")}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH":
		case "SSL_CERT_FILE", "HOME":
			out = append(out, k+"="+filepath.Join(rootfs, v))
		default:
			out = append(out, kv)
		}
	}
	return out
}

func run(t *testing.T, bin string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// checkSum checks that SHA256SUMS (sums) lists path with its SHA-256.
func checkSum(t *testing.T, sums, path string) {
	t.Helper()
	data, err := os.ReadFile(sums)
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	want := hex.EncodeToString(sum[:]) + "  " + filepath.Base(path) + "\n"
	if !strings.Contains(string(data), want) {
		t.Errorf("%s does not list %s with its SHA-256:\n%s", sums, filepath.Base(path), data)
	}
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type manifest struct {
	Config descriptor   `json:"config"`
	Layers []descriptor `json:"layers"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// layout is an OCI image layout read from a tar: its files by name.
type layout map[string][]byte

func readLayout(t *testing.T, path string) layout {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := layout{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			if l[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := string(l["oci-layout"]); !strings.Contains(got, `"imageLayoutVersion":"1.0.0"`) {
		t.Fatalf("%s is not an OCI image layout (oci-layout: %q)", path, got)
	}
	return l
}

// blob returns the blob of digest, checking that its bytes have it.
func (l layout) blob(t *testing.T, digest string) []byte {
	t.Helper()
	data, ok := l["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("the image has no blob %s", digest)
	}
	if sum := sha256.Sum256(data); "sha256:"+hex.EncodeToString(sum[:]) != digest {
		t.Fatalf("blob %s does not have that digest", digest)
	}
	return data
}

func (l layout) json(t *testing.T, digest string, v any) {
	t.Helper()
	if err := json.Unmarshal(l.blob(t, digest), v); err != nil {
		t.Fatalf("blob %s: %v", digest, err)
	}
}

// manifestFor finds the manifest of goos/goarch from the layout's
// index.json, through the image index it names.
func (l layout) manifestFor(t *testing.T, goos, goarch string) manifest {
	t.Helper()
	var top struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(l["index.json"], &top); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json does not name one image index: %s", l["index.json"])
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	l.json(t, top.Manifests[0].Digest, &index)
	for _, d := range index.Manifests {
		if d.Platform != nil && d.Platform.OS == goos && d.Platform.Architecture == goarch {
			var m manifest
			l.json(t, d.Digest, &m)
			return m
		}
	}
	t.Fatalf("the image's index has no manifest for %s/%s", goos, goarch)
	return manifest{}
}

// unpack extracts the gzipped layer (checking its diff ID, the digest of
// the uncompressed tar) into a directory and returns it.
func (l layout) unpack(t *testing.T, digest, diffID string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(l.blob(t, digest)))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != diffID {
		t.Fatalf("the layer's uncompressed digest is not its diff ID %s", diffID)
	}
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			t.Fatalf("the layer has an entry outside its root: %q", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, data, os.FileMode(h.Mode)&0o777)
			}
		default:
			t.Fatalf("the layer has an entry of type %q: %q", h.Typeflag, h.Name)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
