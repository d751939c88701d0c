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
			p = pin{version: f[0], target: target{goos, goarch}, sum: f[2], file: f[3]}
		}
		if len(f) != 4 || !semver.MatchString(p.version) || p.target.arch == "" || !isSHA256(p.sum) {
			return "", nil, fmt.Errorf("%s:%d: %q is not VERSION OS/ARCH SHA256 FILE", path, n, line)
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
// the same SHA-256, in the pins file at path.
func checkPins(path string, built []pin) error {
	_, pinned, err := readPins(path)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range built {
		i := slices.IndexFunc(pinned, func(p pin) bool { return p.version == b.version && p.target == b.target && p.file == b.file })
		switch {
		case i < 0:
			errs = append(errs, fmt.Errorf("%s pins no SHA-256 for %s (%s %s): pin the release before its tag "+
				"(make release-pin VERSION=%s, commit %s, tag that commit; CONTRIBUTING.md, Releases)",
				path, b.file, b.version, b.target, b.version, pinsPath))
		case pinned[i].sum != b.sum:
			errs = append(errs, fmt.Errorf("%s (%s) built with SHA-256 %s, but %s pins %s: this checkout does not "+
				"build the pinned bytes (another Go than go.mod's toolchain line, or a change after pinning)",
				b.file, b.target, b.sum, path, pinned[i].sum))
		}
	}
	return errors.Join(errs...)
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
