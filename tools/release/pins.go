package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
)

// A pins file (pipelines/checksums.txt) holds the SHA-256 of each
// released CLI archive and of the binary it holds, one per line:
//
//	VERSION OS/ARCH SHA256 FILE
//	0.1.0 linux/amd64 5f0c…  s3lock_0.1.0_linux_amd64.tar.gz
//	0.1.0 linux/amd64 9ab1…  s3lock
//
// The CI installer (pipelines/install.sh) installs an archive only if it
// has the SHA-256 the copy at its own ref pins, and takes an s3lock found
// on PATH only if it is the pinned binary. -pin writes the lines of a
// version before its tag; a release at the tag must build those bytes.
// SHA-256s are read in either case and written in lower case.
//
// The GitLab CI template (templatePath) fetches the pins file at the
// commit it is included from, and uses it only if it has the SHA-256 the
// template pins (S3LOCK_CHECKSUMS_SHA256): -pin writes that too, and a
// release checks that the template at its tag pins the pins at its tag.

// pinsHeader starts a new pins file.
const pinsHeader = `# The SHA-256 of each s3lock release's CLI archives and of the binary each
# holds (VERSION OS/ARCH SHA256 FILE), written by make release-pin before the
# release is tagged: pipelines/install.sh installs only what the copy of this
# file at its own ref pins. See CONTRIBUTING.md, Releases.
`

// pin is one line of a pins file.
type pin struct {
	version string
	target  target
	sum     string // hex SHA-256
	file    string // an archive's name, or the binary's (s3lock, s3lock.exe)
}

func (p pin) String() string {
	return fmt.Sprintf("%s %s %s %s", p.version, p.target, p.sum, p.file)
}

// readPins reads a pins file; a missing file pins nothing. It returns the
// comment lines that start it too.
func readPins(path string) (header string, pins []pin, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return pinsHeader, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return parsePins(path, data)
}

// parsePins reads the pins in data, the pins file name; each SHA-256 in
// lower case, as they are compared.
func parsePins(name string, data []byte) (header string, pins []pin, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			if len(pins) == 0 {
				header += sc.Text() + "\n"
			}
			continue
		}
		f := strings.Fields(line)
		var p pin
		if len(f) == 4 {
			goos, goarch, _ := strings.Cut(f[1], "/")
			p = pin{version: f[0], target: target{goos, goarch}, sum: strings.ToLower(f[2]), file: f[3]}
		}
		if len(f) != 4 || !semver.MatchString(p.version) || p.target.arch == "" || !isSHA256(p.sum) {
			return "", nil, fmt.Errorf("%s:%d: %q is not VERSION OS/ARCH SHA256 FILE", name, n, line)
		}
		pins = append(pins, p)
	}
	return header, pins, sc.Err()
}

// writePins writes pins into the pins file at path in place of the lines
// of the same version, target and file, and after the others.
func writePins(path string, pins []pin) error {
	header, old, err := readPins(path)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(header)
	for _, o := range old {
		if !slices.ContainsFunc(pins, func(p pin) bool { return p.version == o.version && p.target == o.target && p.file == o.file }) {
			b.WriteString(o.String() + "\n")
		}
	}
	for _, p := range pins {
		b.WriteString(p.String() + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// checkPins returns an error unless every one of built is pinned, with
// the same SHA-256, in data, the pins file path (as committed: a release's
// pins are its tag's, not the checkout's).
func checkPins(path string, data []byte, built []pin) error {
	_, pinned, err := parsePins(path, data)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range built {
		i := slices.IndexFunc(pinned, func(p pin) bool { return p.version == b.version && p.target == b.target && p.file == b.file })
		switch {
		case i < 0:
			errs = append(errs, fmt.Errorf("%s pins no SHA-256 for %s (%s %s): pin the release before its tag "+
				"(make release-pin VERSION=%s, commit %s and %s, tag that commit; CONTRIBUTING.md, Releases)",
				path, b.file, b.version, b.target, b.version, pinsPath, templatePath))
		case pinned[i].sum != b.sum:
			errs = append(errs, fmt.Errorf("%s (%s) built with SHA-256 %s, but %s pins %s: this checkout does not "+
				"build the pinned bytes (another Go than go.mod's toolchain line, or a change after pinning)",
				b.file, b.target, b.sum, path, pinned[i].sum))
		}
	}
	return errors.Join(errs...)
}

// templatePin matches the template's S3LOCK_CHECKSUMS_SHA256 line: its
// value is the pins file's SHA-256.
var templatePin = regexp.MustCompile(`(?m)^(\s+S3LOCK_CHECKSUMS_SHA256:\s+)"?([0-9A-Fa-f]{64})"?`)

// templatePins returns the SHA-256 of the pins file that template (the
// GitLab CI template's text, named name) pins, in lower case.
func templatePins(name string, template []byte) (string, error) {
	m := templatePin.FindAllSubmatch(template, -1)
	if len(m) != 1 {
		return "", fmt.Errorf("%s has %d S3LOCK_CHECKSUMS_SHA256 lines with a SHA-256; want 1 (the SHA-256 of %s)", name, len(m), pinsPath)
	}
	return strings.ToLower(string(m[0][2])), nil
}

// writeTemplatePins sets the S3LOCK_CHECKSUMS_SHA256 of the GitLab CI
// template at path to the SHA-256 of the pins file at pinsFile.
func writeTemplatePins(path, pinsFile string) error {
	sum, err := fileSum(pinsFile)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := templatePins(path, data); err != nil {
		return err
	}
	data = templatePin.ReplaceAll(data, []byte("${1}"+sum))
	return os.WriteFile(path, data, 0o644)
}

// checkTemplatePins returns an error unless template, the GitLab CI
// template named name, pins the SHA-256 of pins (the pins file's bytes).
func checkTemplatePins(name string, template, pins []byte) error {
	got, err := templatePins(name, template)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(pins)
	if want := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%s pins %s with SHA-256 %s, but it is %s: the template would refuse the release's pins "+
			"(make release-pin VERSION=... writes both; commit them, and tag that commit)", name, pinsPath, got, want)
	}
	return nil
}

func isSHA256(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 2*sha256.Size
}

// fileSum returns the hex SHA-256 of the file at path.
func fileSum(path string) (string, error) {
	h := sha256.New()
	if err := copyFrom(h, path); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
