// Command release builds s3lock's release artifacts from a checkout (make
// release):
//
//   - the provider's Terraform Registry zips, one per OS and architecture
//     (terraform-provider-s3lock_VERSION_OS_ARCH.zip, holding
//     terraform-provider-s3lock_vVERSION and LICENSE), the registry manifest
//     (terraform-provider-s3lock_VERSION_manifest.json) and
//     terraform-provider-s3lock_VERSION_SHA256SUMS over both;
//   - the CLI's archives for Linux, macOS and Windows on amd64 and arm64
//     (s3lock_VERSION_OS_ARCH.tar.gz, .zip on Windows, holding s3lock,
//     LICENSE and README.md), its container image for linux/amd64 and
//     linux/arm64 (s3lock_VERSION_image.tar, an OCI image layout; see
//     image.go) and s3lock_VERSION_SHA256SUMS;
//   - with -sign KEY, a detached GnuPG signature of each SHA256SUMS
//     (NAME.sig, binary, as the registry expects).
//
// The same commit gives the same bytes: binaries are built with -trimpath,
// without a build ID and without cgo; archive entries carry the commit's
// time, fixed modes and no owner; gzip streams carry no time; the image
// is made of those and of the CA bundle it is given (-ca-bundle: the same
// bundle gives the same image). Signatures carry the time they were made,
// so only unsigned artifacts repeat.
//
// Without -version the release is a snapshot, 0.0.0-snapshot.COMMIT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Names of what a release holds. The provider's follow the Terraform
// Registry's publishing rules; the CLI's mirror them.
const (
	providerName = "terraform-provider-s3lock"
	cliName      = "s3lock"
)

// target is one OS and architecture, as GOOS/GOARCH name them.
type target struct{ os, arch string }

func (t target) String() string { return t.os + "/" + t.arch }

// providerTargets is the matrix HashiCorp's providers are released for.
var providerTargets = []target{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"freebsd", "386"}, {"freebsd", "amd64"}, {"freebsd", "arm"}, {"freebsd", "arm64"},
	{"linux", "386"}, {"linux", "amd64"}, {"linux", "arm"}, {"linux", "arm64"},
	{"windows", "386"}, {"windows", "amd64"}, {"windows", "arm64"},
}

// cliTargets is where the CLI runs: CI runners and laptops.
var cliTargets = []target{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "amd64"}, {"linux", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// semver is a release version without its leading "v": what the registry
// and the artifacts' names use.
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// config is what one run builds.
type config struct {
	repo     string   // the checkout's root
	out      string   // the directory the release's own directory goes into
	version  string   // without "v"; "" = a snapshot
	only     []target // nil = every target
	provider bool     // build the provider's artifacts
	cli      bool     // build the CLI's artifacts and image
	caFile   string   // the image's CA bundle
	signKey  string   // a GnuPG key ID; "" = unsigned
}

func main() {
	var cfg config
	var only string
	flag.StringVar(&cfg.repo, "repo", ".", "the checkout to build from")
	flag.StringVar(&cfg.out, "out", "dist", "where the release's directory (named for its version) is written")
	flag.StringVar(&cfg.version, "version", "", "the version to release, like 0.1.0 (default: a snapshot, 0.0.0-snapshot.COMMIT)")
	flag.StringVar(&only, "targets", "", "build only these OS/ARCH targets, comma-separated (default: every target)")
	flag.StringVar(&cfg.signKey, "sign", "", "sign each SHA256SUMS with this GnuPG key (gpg --local-user)")
	flag.BoolVar(&cfg.provider, "provider", true, "build the provider's artifacts (-provider=false: not)")
	flag.BoolVar(&cfg.cli, "cli", true, "build the CLI's archives and image (-cli=false: not)")
	flag.StringVar(&cfg.caFile, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle (PEM) the CLI's image holds")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q (the flags are listed by -help)", flag.Args()))
	}
	var err error
	if cfg.only, err = parseTargets(only); err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := release(ctx, cfg)
	if err != nil {
		fail(err)
	}
	fmt.Println(dir)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

// parseTargets reads -targets: each must be one the provider or the CLI is
// released for.
func parseTargets(s string) ([]target, error) {
	if s == "" {
		return nil, nil
	}
	var ts []target
	for _, part := range strings.Split(s, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(part), "/")
		t := target{goos, goarch}
		if !ok || (!slices.Contains(providerTargets, t) && !slices.Contains(cliTargets, t)) {
			return nil, fmt.Errorf("-targets: %q is not a target of the release (provider: %s; CLI: %s)", part, list(providerTargets), list(cliTargets))
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func list(ts []target) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// release builds every artifact into OUT/VERSION and returns that
// directory.
func release(ctx context.Context, cfg config) (string, error) {
	repo, err := filepath.Abs(cfg.repo)
	if err != nil {
		return "", err
	}
	src, err := readSource(ctx, repo)
	if err != nil {
		return "", err
	}
	version := strings.TrimPrefix(cfg.version, "v")
	if version == "" {
		version = "0.0.0-snapshot." + src.commit
	}
	if !semver.MatchString(version) {
		return "", fmt.Errorf("-version %q is not a semantic version like 0.1.0 or 0.2.0-rc.1", cfg.version)
	}
	if src.dirty {
		fmt.Fprintf(os.Stderr, "release: %s has uncommitted changes: the binaries record them as modified and another checkout of %s will not give the same bytes\n", repo, src.commit)
	}
	dir := filepath.Join(cfg.out, version)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	r := &builder{repo: repo, dir: dir, version: version, mtime: src.time, signKey: cfg.signKey}
	if cfg.provider {
		if err := r.provider(ctx, selected(providerTargets, cfg.only)); err != nil {
			return "", err
		}
	}
	if !cfg.cli {
		return dir, nil
	}
	written, err := r.cli(ctx, selected(cliTargets, cfg.only))
	if err != nil {
		return "", err
	}
	image, err := r.image(ctx, selected(imageTargets, cfg.only), cfg.caFile)
	if err != nil {
		return "", err
	}
	if image != "" {
		written = append(written, image)
	}
	if len(written) > 0 {
		err = r.sums(ctx, cliName+"_"+version+"_SHA256SUMS", written)
	}
	return dir, err
}

// selected is the part of ts that only names (all of ts when only is nil).
func selected(ts, only []target) []target {
	if only == nil {
		return ts
	}
	var out []target
	for _, t := range ts {
		if slices.Contains(only, t) {
			out = append(out, t)
		}
	}
	return out
}

// builder writes one release's artifacts.
type builder struct {
	repo, dir, version string
	mtime              time.Time // of every archive entry: the commit's
	signKey            string
}

// provider writes the registry's zips, the manifest and SHA256SUMS.
func (b *builder) provider(ctx context.Context, targets []target) error {
	if len(targets) == 0 {
		return nil
	}
	prefix := providerName + "_" + b.version
	var written []string
	for _, t := range targets {
		bin := providerName + "_v" + b.version + exe(t)
		zip := fmt.Sprintf("%s_%s_%s.zip", prefix, t.os, t.arch)
		if err := b.archive(ctx, t, ".", zip, []entry{{name: bin, binary: true}, {name: "LICENSE", src: "LICENSE"}}); err != nil {
			return err
		}
		written = append(written, zip)
	}
	manifest := prefix + "_manifest.json"
	if err := copyFile(filepath.Join(b.repo, "terraform-registry-manifest.json"), filepath.Join(b.dir, manifest)); err != nil {
		return err
	}
	return b.sums(ctx, prefix+"_SHA256SUMS", append(written, manifest))
}

// cli writes the CLI's archives and returns their names.
func (b *builder) cli(ctx context.Context, targets []target) ([]string, error) {
	prefix := cliName + "_" + b.version
	var written []string
	for _, t := range targets {
		name := fmt.Sprintf("%s_%s_%s.tar.gz", prefix, t.os, t.arch)
		if t.os == "windows" {
			name = strings.TrimSuffix(name, ".tar.gz") + ".zip"
		}
		entries := []entry{
			{name: cliName + exe(t), binary: true},
			{name: "LICENSE", src: "LICENSE"},
			{name: "README.md", src: "cmd/s3lock/README.md"},
		}
		if err := b.archive(ctx, t, "./cmd/s3lock", name, entries); err != nil {
			return nil, err
		}
		written = append(written, name)
	}
	return written, nil
}

// archive builds pkg for t and writes an archive (zip or tar.gz, by name)
// of entries; the entry marked binary is the built program.
func (b *builder) archive(ctx context.Context, t target, pkg, name string, entries []entry) error {
	tmp, err := os.MkdirTemp("", "s3lock-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	if err := goBuild(ctx, b.repo, t, pkg, "v"+b.version, bin); err != nil {
		return err
	}
	for i := range entries {
		if entries[i].binary {
			entries[i].src = bin
		} else {
			entries[i].src = filepath.Join(b.repo, entries[i].src)
		}
	}
	fmt.Fprintf(os.Stderr, "release: %s\n", name)
	path := filepath.Join(b.dir, name)
	if strings.HasSuffix(name, ".zip") {
		return writeZip(path, entries, b.mtime)
	}
	return writeTarGz(path, entries, b.mtime)
}

// sums writes SHA256SUMS over files and, with a key, its signature.
func (b *builder) sums(ctx context.Context, name string, files []string) error {
	if err := writeSums(b.dir, name, files); err != nil {
		return err
	}
	if b.signKey == "" {
		return nil
	}
	return sign(ctx, b.signKey, filepath.Join(b.dir, name))
}

func exe(t target) string {
	if t.os == "windows" {
		return ".exe"
	}
	return ""
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		return errors.Join(fmt.Errorf("writing %s", to), err)
	}
	return nil
}
