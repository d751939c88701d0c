package install_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// The installer (pipelines/install.sh) that the action and the template
// run trusts the pins at its own ref, not the place it downloads from.

// installer runs pipelines/install.sh as a job would, with vars besides
// the machine's environment (RUNNER_TEMP a fresh directory, unless vars
// sets it), and returns the directory it printed, what it logged, and its
// error.
func (s *releaseServer) installer(t *testing.T, vars map[string]string) (string, string, error) {
	t.Helper()
	env := append(machineEnv(), "S3LOCK_VERSION="+releaseVersion, "S3LOCK_DOWNLOAD_URL="+s.srv.URL+"/release",
		"S3LOCK_CHECKSUMS="+cliPins(t), "RUNNER_TEMP="+t.TempDir())
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(s.root, "pipelines", "install.sh"))
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return strings.TrimSpace(stdout.String()), stderr.String(), err
}

// archiveSum is the SHA-256 of the test release's archive for this machine.
func archiveSum(t *testing.T) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(cliRelease(t), "s3lock_*_linux_*.tar.gz"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("the release's archive: %q, %v", matches, err)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func TestInstaller_RefusesAnArchiveThatIsNotThePinnedOne(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	dir, log, err := s.installer(t, map[string]string{"S3LOCK_DOWNLOAD_URL": s.srv.URL + "/tampered"})
	if err == nil || !strings.Contains(log, "not installing it") {
		t.Fatalf("the installer, served an archive that is not the pinned one: printed %q, %v\n%s; want refused", dir, err, log)
	}
	// The release's own SHA256SUMS, served beside it, lists the changed
	// archive's bytes: only the pins count.
	if dir, log, err := s.installer(t, map[string]string{"S3LOCK_SHA256": strings.Repeat("0", 64)}); err == nil || !strings.Contains(log, "but") {
		t.Errorf("the installer, given a SHA-256 other than the pinned one: printed %q, %v\n%s; want refused", dir, err, log)
	}
}

func TestInstaller_RefusesAVersionItDoesNotPinUnlessGivenItsHash(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	unpinned := filepath.Join(s.root, "pipelines", "checksums.txt") // pins no 0.0.0-… version
	dir, log, err := s.installer(t, map[string]string{"S3LOCK_CHECKSUMS": unpinned})
	if err == nil || !strings.Contains(log, "pins no SHA-256") || !strings.Contains(log, "sha256 input") {
		t.Fatalf("the installer, for a version its pins do not list: printed %q, %v\n%s; want refused, naming the sha256 input", dir, err, log)
	}
	dir, log, err = s.installer(t, map[string]string{"S3LOCK_CHECKSUMS": unpinned, "S3LOCK_SHA256": strings.ToUpper(archiveSum(t))})
	if err != nil {
		t.Fatalf("the installer, given the archive's SHA-256: %v\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(dir, "s3lock")); err != nil {
		t.Errorf("the installer printed %q, which holds no s3lock: %v", dir, err)
	}
}

// TestInstaller_InstallsIntoADirectoryOfItsOwn: by default into a new
// private directory under RUNNER_TEMP, never into one made before (the
// fixed path of older installers); S3LOCK_INSTALL_DIR only into a
// directory of this user's that no one else may write.
func TestInstaller_InstallsIntoADirectoryOfItsOwn(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	runnerTemp := t.TempDir()
	premade := filepath.Join(runnerTemp, "s3lock-"+releaseVersion)
	if err := os.Mkdir(premade, 0o777); err != nil {
		t.Fatal(err)
	}
	dir, log, err := s.installer(t, map[string]string{"RUNNER_TEMP": runnerTemp})
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != runnerTemp || dir == premade || info.Mode().Perm() != 0o700 {
		t.Errorf("the installer installed into %s (mode %v); want a new directory under RUNNER_TEMP %s, mode 0700", dir, info.Mode().Perm(), runnerTemp)
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, log, err := s.installer(t, map[string]string{"S3LOCK_INSTALL_DIR": open}); err == nil || !strings.Contains(log, "may be written by other users") {
		t.Errorf("S3LOCK_INSTALL_DIR writable by everyone: %v\n%s; want refused", err, log)
	}
	if os.Getuid() == 0 { // only root can give a directory away
		theirs := filepath.Join(t.TempDir(), "theirs")
		if err := os.Mkdir(theirs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, log, err := s.installer(t, map[string]string{"S3LOCK_INSTALL_DIR": theirs}); err == nil || !strings.Contains(log, "belongs to another user") {
			t.Errorf("S3LOCK_INSTALL_DIR of another user: %v\n%s; want refused", err, log)
		}
	}
	made := filepath.Join(t.TempDir(), "made")
	if dir, log, err := s.installer(t, map[string]string{"S3LOCK_INSTALL_DIR": made}); err != nil || dir != made {
		t.Errorf("S3LOCK_INSTALL_DIR that does not exist yet: printed %q, %v\n%s; want it made and used", dir, err, log)
	}
}

// TestInstaller_UsesAnS3lockOnPATHOnlyIfPinned: an s3lock on PATH that
// says it is the version is not taken at its word; the pinned binary is
// used without a download.
func TestInstaller_UsesAnS3lockOnPATHOnlyIfPinned(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	impostor := t.TempDir()
	script := "#!/bin/sh\necho \"s3lock v" + releaseVersion + "\"\n"
	if err := os.WriteFile(filepath.Join(impostor, "s3lock"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, log, err := s.installer(t, map[string]string{"PATH": impostor + string(os.PathListSeparator) + os.Getenv("PATH")})
	if err != nil || dir == impostor {
		t.Fatalf("with an s3lock on PATH that is not the pinned binary: printed %q, %v\n%s; want it ignored and the release installed", dir, err, log)
	}
	installed := dir
	dir, log, err = s.installer(t, map[string]string{
		"PATH":                installed + string(os.PathListSeparator) + os.Getenv("PATH"),
		"S3LOCK_DOWNLOAD_URL": s.srv.URL + "/nothing-here",
	})
	if err != nil || dir != installed {
		t.Errorf("with the pinned binary on PATH: printed %q, %v\n%s; want %s used, nothing downloaded", dir, err, log, installed)
	}
}

// TestGitHubAction_PinnedByCommit: uses: …@<commit> needs the version
// input (the ref is no version), and works with it.
func TestGitHubAction_PinnedByCommit(t *testing.T) {
	t.Parallel()
	p := newPipelines(t)
	lock := p.ns.Name("ci/github-commit")
	job := p.githubJob(t, "job", "")
	job.ref = sourceRef
	inputs := map[string]string{"mode": "acquire", "lock": lock, "bucket": p.ns.Bucket}
	if _, err := job.run(t, inputs); err == nil || !strings.Contains(err.Error(), "set its version input") {
		t.Fatalf("the action pinned by commit, without the version input: %v; want refused, naming the input", err)
	}
	inputs["version"] = releaseVersion
	job.uses(t, inputs)
	job.uses(t, map[string]string{"mode": "release", "version": releaseVersion})
	if st := p.current(t, lock); st.Held {
		t.Errorf("after mode release the lock is still held: %+v", st)
	}
}

// TestGitLabTemplate_PinsItsOwnInstaller: the template's
// S3LOCK_INSTALLER_SHA256 is pipelines/install.sh's of the same tree.
func TestGitLabTemplate_PinsItsOwnInstaller(t *testing.T) {
	t.Parallel()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "pipelines", "gitlab", "s3lock.gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var jobs map[string]gitlabJob
	if err := yaml.Unmarshal(data, &jobs); err != nil {
		t.Fatal(err)
	}
	installer, err := os.ReadFile(filepath.Join(root, "pipelines", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(installer)
	if got, want := jobs[".s3lock"].Variables["S3LOCK_INSTALLER_SHA256"], hex.EncodeToString(sum[:]); got != want {
		t.Errorf("pipelines/gitlab/s3lock.gitlab-ci.yml pins the installer %s, but pipelines/install.sh's SHA-256 is %s: "+
			"set S3LOCK_INSTALLER_SHA256 to it", got, want)
	}
}
