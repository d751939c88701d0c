package install_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/timeline"
)

// envStep makes the test binary act as a guarded step (see TestMain): the
// command the CI pipelines' tests run under the lock.
const envStep = "S3LOCK_INSTALL_STEP"

// hold is how long each guarded step holds the lock.
const hold = time.Second

// releaseVersion is the version the tests release and install: a
// snapshot's (0.0.0-…), which make release's tool builds from a checkout
// with uncommitted changes, as a release's it would not.
const releaseVersion = "0.0.0-lab.1"

func TestMain(m *testing.M) {
	timeline.StepMain(envStep, hold) // run by a CI job as the command under the lock
	code := s3test.Main(m)
	if releaseOut != "" {
		_ = os.RemoveAll(releaseOut)
	}
	os.Exit(code)
}

var (
	releaseOnce sync.Once
	releaseOut  string
	releaseDir  string
	releasePins string
	releaseErr  error
)

// cliRelease returns the directory of a release (releaseVersion) of the
// CLI for this machine's Linux architecture, with its image: built once,
// by make release's tool, for every test of the package.
func cliRelease(t *testing.T) string {
	t.Helper()
	releaseOnce.Do(buildRelease)
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseDir
}

// cliPins returns a pins file (pipelines/checksums.txt's form) that pins
// cliRelease's archive and binary: what a ref of the action or the
// template that pins the release holds. make release's tool writes it
// (-pin).
func cliPins(t *testing.T) string {
	t.Helper()
	cliRelease(t)
	return releasePins
}

func buildRelease() {
	var root string
	if root, releaseErr = tfharness.RepoRoot(); releaseErr != nil {
		return
	}
	if releaseOut, releaseErr = os.MkdirTemp("", "s3lock-install-"); releaseErr != nil { //nolint:usetesting // shared by every test of the binary
		return
	}
	releasePins = filepath.Join(releaseOut, "checksums.txt")
	for _, args := range [][]string{
		{"-out", releaseOut, "-provider=false"},
		{"-out", filepath.Join(releaseOut, "pinned"), "-pin", "-pins", releasePins},
	} {
		cmd := exec.Command("go", append([]string{"-C", filepath.Join(root, "tools", "release"), "run", ".",
			"-repo", root, "-version", releaseVersion, "-targets", "linux/" + runtime.GOARCH}, args...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			releaseErr = fmt.Errorf("building the release (tools/release %s): %w\n%s", strings.Join(args, " "), err, b)
			return
		}
	}
	releaseDir = filepath.Join(releaseOut, releaseVersion)
}
