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
// The same commit gives the same bytes: binaries are built by the Go that
// go.mod's toolchain line names, in an environment of their own (build.go:
// none of the builder's GOFLAGS, GOAMD64, GOEXPERIMENT or go env file),
// with -trimpath, without a build ID, VCS stamp or cgo; archive entries
// carry the time of the newest commit that changed more than the pins
// (pipelines/checksums.txt and the GitLab CI template), fixed modes and no owner; gzip streams carry no
// time; the image is made of those and of the CA bundle it is given
// (-ca-bundle: the same bundle gives the same image). Signatures carry the
// time they were made, so only unsigned artifacts repeat.
//
// A release (-version) is built from a clean checkout at its tag, and its
// CLI archives must be the ones pipelines/checksums.txt pins as committed
// at the tag (pins.go), whose SHA-256 the GitLab CI template there pins;
// -pin writes both, before the tag. Without -version the release is
// a snapshot, 0.0.0-snapshot.COMMIT: any version 0.0.0-… builds from any
// checkout and needs no pins.
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
	caFile   string   // the image's CA bundle; "" = the machine's, for a snapshot
	signKey  string   // a GnuPG key ID; "" = unsigned
	pin      bool     // only build the CLI's archives, and pin them
	pins     string   // the pins file; "" = the checkout's pinsPath
}

// machineCAFile is the CA bundle a snapshot's image holds when -ca-bundle
// names none: the builder's (Debian's and Ubuntu's path). A release's
// image holds the bundle it is given, never the builder's by default.
const machineCAFile = "/etc/ssl/certs/ca-certificates.crt"

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
	flag.StringVar(&cfg.caFile, "ca-bundle", "", "the CA bundle (PEM) the CLI's image holds (required with -version; a snapshot's default: "+machineCAFile+")")
	flag.BoolVar(&cfg.pin, "pin", false, "build only the CLI's archives and write their SHA-256 into the pins file, before the release is tagged")
	flag.StringVar(&cfg.pins, "pins", "", "another pins file than "+pinsPath+" in -repo, for a snapshot (0.0.0-...) only")
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
	if err := checkConfig(&cfg, src, repo, version); err != nil {
		return "", err
	}
	goenv, err := goEnv(ctx)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cfg.out, version)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	r := &builder{repo: repo, dir: dir, version: version, mtime: src.time, signKey: cfg.signKey, toolchain: src.toolchain, goEnv: goenv}
	if cfg.provider {
		if err := r.provider(ctx, selected(providerTargets, cfg.only)); err != nil {
			return "", err
		}
	}
	if !cfg.cli {
		return dir, nil
	}
	written, pins, err := r.cli(ctx, selected(cliTargets, cfg.only))
	if err != nil {
		return "", err
	}
	switch {
	case cfg.pin:
		if err := writePins(cfg.pins, pins); err != nil {
			return "", err
		}
		fmt.Fprintf(os.Stderr, "release: pinned the CLI's archives of %s in %s\n", version, cfg.pins)
		if cfg.pins == filepath.Join(repo, pinsPath) {
			if err := writeTemplatePins(filepath.Join(repo, templatePath), cfg.pins); err != nil {
				return "", err
			}
			fmt.Fprintf(os.Stderr, "release: pinned %s's SHA-256 in %s\n", pinsPath, templatePath)
		}
		return dir, nil
	case !snapshot(version):
		if err := checkCommittedPins(ctx, repo, pins); err != nil {
			return "", err
		}
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

// checkConfig completes cfg and refuses what may not be built: a release
// (not a snapshot) from a dirty or untagged checkout, with pins other than
// the checkout's (-pins), or with an image whose CA bundle is not named.
func checkConfig(cfg *config, src source, repo, version string) error {
	if cfg.pins != "" && !snapshot(version) {
		return fmt.Errorf("-pins %s: a release's pins are %s as committed at its tag, not another file; "+
			"-pins is for snapshots (0.0.0-..., like the lab's)", cfg.pins, pinsPath)
	}
	if cfg.pins == "" {
		cfg.pins = filepath.Join(repo, pinsPath)
	}
	if cfg.pin {
		cfg.provider, cfg.cli = false, true
	}
	if snapshot(version) {
		if cfg.caFile == "" {
			cfg.caFile = machineCAFile
		}
		return nil
	}
	if err := src.releasable(version, cfg.pin); err != nil {
		return err
	}
	if cfg.caFile == "" && cfg.cli && !cfg.pin && len(selected(imageTargets, cfg.only)) > 0 {
		return fmt.Errorf("the image of release %s needs its CA bundle named (-ca-bundle FILE, make release CA_BUNDLE=FILE): "+
			"a release does not take the builder's; CONTRIBUTING.md, Releases, says which", version)
	}
	return nil
}

// checkCommittedPins returns an error unless the pins committed at HEAD
// (the release's tag) pin built, and the GitLab CI template committed there
// pins those pins: what users of that commit's action and template check
// the release against.
func checkCommittedPins(ctx context.Context, repo string, built []pin) error {
	pins, err := gitFile(ctx, repo, "HEAD", pinsPath)
	if err != nil {
		return err
	}
	name := pinsPath + " at HEAD"
	if err := checkPins(name, pins, built); err != nil {
		return err
	}
	template, err := gitFile(ctx, repo, "HEAD", templatePath)
	if err != nil {
		return err
	}
	return checkTemplatePins(templatePath+" at HEAD", template, pins)
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
	mtime              time.Time // of every archive entry: the tree's (source.time)
	signKey            string
	toolchain          string            // the Go that builds, like go1.26.8
	goEnv              map[string]string // goEnvPassed, the builder's
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
		if _, err := b.archive(ctx, t, ".", zip, []entry{{name: bin, binary: true}, {name: "LICENSE", src: "LICENSE"}}); err != nil {
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

// cli writes the CLI's archives and returns their names, and the pins of
// the archives and the binaries they hold.
func (b *builder) cli(ctx context.Context, targets []target) ([]string, []pin, error) {
	prefix := cliName + "_" + b.version
	var written []string
	var pins []pin
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
		binSum, err := b.archive(ctx, t, "./cmd/s3lock", name, entries)
		if err != nil {
			return nil, nil, err
		}
		sum, err := fileSum(filepath.Join(b.dir, name))
		if err != nil {
			return nil, nil, err
		}
		written = append(written, name)
		pins = append(pins, pin{b.version, t, sum, name}, pin{b.version, t, binSum, cliName + exe(t)})
	}
	return written, pins, nil
}

// archive builds pkg for t and writes an archive (zip or tar.gz, by name)
// of entries; the entry marked binary is the built program, whose SHA-256
// it returns.
func (b *builder) archive(ctx context.Context, t target, pkg, name string, entries []entry) (string, error) {
	tmp, err := os.MkdirTemp("", "s3lock-release-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	binSum, err := b.goBuild(ctx, t, pkg, bin)
	if err != nil {
		return "", err
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
		return binSum, writeZip(path, entries, b.mtime)
	}
	return binSum, writeTarGz(path, entries, b.mtime)
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
