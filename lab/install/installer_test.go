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

// TestGitLabTemplate_PinsItsOwnInstallerAndChecksums: the template's
// S3LOCK_INSTALLER_SHA256 and S3LOCK_CHECKSUMS_SHA256 are the SHA-256 of
// pipelines/install.sh and pipelines/checksums.txt of the same tree (make
// release-pin writes the second).
func TestGitLabTemplate_PinsItsOwnInstallerAndChecksums(t *testing.T) {
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
	for variable, file := range map[string]string{"S3LOCK_INSTALLER_SHA256": "install.sh", "S3LOCK_CHECKSUMS_SHA256": "checksums.txt"} {
		if got, want := jobs[".s3lock"].Variables[variable], fileSHA256(t, filepath.Join(root, "pipelines", file)); got != want {
			t.Errorf("pipelines/gitlab/s3lock.gitlab-ci.yml pins pipelines/%s with %s %s, but its SHA-256 is %s: set it", file, variable, got, want)
		}
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestGitLabTemplate_RefusesChecksumsItDoesNotPin: the pins fetched at
// S3LOCK_REF, which the job's author types apart from the include's
// integrity, are used only if they are the ones the template pins; a
// wrong ref serving pins of a tampered archive, downloaded from a
// compromised mirror, installs nothing. The job leaves no installer
// behind.
func TestGitLabTemplate_RefusesChecksumsItDoesNotPin(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	dir := t.TempDir()
	out, err := s.gitlabJob(t, s.gitlabTemplate(t), dir, machineEnv(), map[string]string{
		"S3LOCK_REF": tamperedRef, "S3LOCK_DOWNLOAD_URL": s.srv.URL + "/tampered",
		"S3LOCK_LOCK": "lock", "S3LOCK_COMMAND": "true",
	})
	if err == nil || !strings.Contains(string(out), "pipelines/checksums.txt at S3LOCK_REF "+tamperedRef+" is not the one this template pins") {
		t.Errorf("the template at a ref whose pins are not its own: %v\n%s; want refused, naming checksums.txt", err, out)
	}
	noInstallerLeft(t, dir)
	if left, _ := filepath.Glob(filepath.Join(dir, "s3lock.*")); len(left) > 0 {
		t.Errorf("the refused job installed s3lock: %q", left)
	}
}

// TestGitHubAction_AtAMajorVersionTagAsksForTheVersion: uses: …@v1 names
// no release; the error says so and names the version input, rather than
// the installer's "no version" for "v1".
func TestGitHubAction_AtAMajorVersionTagAsksForTheVersion(t *testing.T) {
	t.Parallel()
	p := newPipelines(t)
	for _, ref := range []string{"v1", "v1.2"} {
		job := p.githubJob(t, "job", "")
		job.ref = ref
		_, err := job.run(t, map[string]string{"mode": "release"})
		if err == nil || !strings.Contains(err.Error(), "'"+ref+"', a major-version tag") || !strings.Contains(err.Error(), "set its version input") {
			t.Errorf("the action at %s without the version input: %v; want refused as a major-version tag, naming the input", ref, err)
		}
	}
}

// TestInstaller_UsesAnS3lockOnPATHOnlyIfNoOneElseCanChangeIt: the pinned
// binary on PATH is used only if its file, its real directory (symbolic
// links followed) and the directories above are not writable by others:
// else it could be swapped between its check and its use (an old
// /tmp/s3lock-VERSION of an earlier installer on a shell runner).
func TestInstaller_UsesAnS3lockOnPATHOnlyIfNoOneElseCanChangeIt(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	installed, log, err := s.installer(t, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	binary, err := os.ReadFile(filepath.Join(installed, "s3lock"))
	if err != nil {
		t.Fatal(err)
	}
	// place puts the pinned binary, with mode, into a new directory with
	// dirMode, under parent (a new private directory if ""); it returns
	// the directory.
	place := func(parent string, dirMode, mode os.FileMode) string {
		if parent == "" {
			parent = t.TempDir()
		}
		dir, err := os.MkdirTemp(parent, "bin") //nolint:usetesting // under parent, which t.TempDir cannot make
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "s3lock")
		if err := os.WriteFile(bin, binary, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(bin, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, dirMode); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	open := place("", 0o777, 0o755)
	below := place(open, 0o755, 0o755)
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(open, "s3lock"), filepath.Join(linked, "s3lock")); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{
		"in a directory anyone may write":                   open,
		"writable by anyone, in a private directory":        place("", 0o755, 0o777),
		"mode 0666, in a directory anyone may write":        place("", 0o777, 0o666),
		"writable by its group":                             place("", 0o755, 0o775),
		"in a directory below one anyone may write":         below,
		"a symbolic link into a directory anyone may write": linked,
	} {
		got, log, err := s.installer(t, map[string]string{"PATH": dir + string(os.PathListSeparator) + os.Getenv("PATH")})
		if err != nil || got == dir || got == open || got == below || !strings.Contains(log, "not using") {
			t.Errorf("the pinned s3lock on PATH %s: printed %q, %v\n%s; want it not used, and a fresh install", name, got, err, log)
		}
	}

	// A symbolic link to the pinned binary in a private directory: the
	// directory printed is the binary's own.
	safe := place("", 0o700, 0o755)
	if err := os.Remove(filepath.Join(linked, "s3lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(safe, "s3lock"), filepath.Join(linked, "s3lock")); err != nil {
		t.Fatal(err)
	}
	got, log, err := s.installer(t, map[string]string{
		"PATH":                linked + string(os.PathListSeparator) + os.Getenv("PATH"),
		"S3LOCK_DOWNLOAD_URL": s.srv.URL + "/nothing-here",
	})
	real, _ := filepath.EvalSymlinks(safe)
	if err != nil || got != real {
		t.Errorf("a link on PATH to the pinned s3lock in a private directory: printed %q, %v\n%s; want %s used", got, err, log, real)
	}
}

// TestInstaller_RefusesAnInstallDirOthersCanReplace: S3LOCK_INSTALL_DIR
// may not be a symbolic link, with a trailing slash or without, nor lie
// below a directory others may write that is not sticky (they could
// rename it and put their own in its place).
func TestInstaller_RefusesAnInstallDirOthersCanReplace(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	target := filepath.Join(t.TempDir(), "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{link, link + "/", link + "//"} {
		if got, log, err := s.installer(t, map[string]string{"S3LOCK_INSTALL_DIR": dir}); err == nil || !strings.Contains(log, "symbolic link") {
			t.Errorf("S3LOCK_INSTALL_DIR %s, a symbolic link: printed %q, %v\n%s; want refused", dir, got, err, log)
		}
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(open, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if got, log, err := s.installer(t, map[string]string{"S3LOCK_INSTALL_DIR": private}); err == nil || !strings.Contains(log, "above it, may be written by other users and is not sticky") {
		t.Errorf("S3LOCK_INSTALL_DIR in a directory anyone may write: printed %q, %v\n%s; want refused", got, err, log)
	}
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if got, log, err := s.installer(t, map[string]string{"S3LOCK_INSTALL_DIR": private}); err != nil || got != private {
		t.Errorf("S3LOCK_INSTALL_DIR in a sticky directory anyone may write (as /tmp): printed %q, %v\n%s; want it used", got, err, log)
	}
}

// TestInstaller_FailedInstallLeavesNothingBehind: an archive refused, or
// not found, leaves no directory in RUNNER_TEMP.
func TestInstaller_FailedInstallLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	for name, vars := range map[string]map[string]string{
		"another SHA-256": {"S3LOCK_SHA256": strings.Repeat("0", 64)},
		"not found":       {"S3LOCK_DOWNLOAD_URL": s.srv.URL + "/nothing-here"},
		"tampered":        {"S3LOCK_DOWNLOAD_URL": s.srv.URL + "/tampered"},
	} {
		runnerTemp := t.TempDir()
		vars["RUNNER_TEMP"] = runnerTemp
		if _, log, err := s.installer(t, vars); err == nil {
			t.Fatalf("%s: the installer succeeded\n%s", name, log)
		}
		if left, _ := os.ReadDir(runnerTemp); len(left) > 0 {
			t.Errorf("%s: the failed install left %v in RUNNER_TEMP", name, left)
		}
	}
}

// TestInstaller_TakesPinsInUpperCase: a SHA-256 is hex in either case, in
// the pins as in S3LOCK_SHA256.
func TestInstaller_TakesPinsInUpperCase(t *testing.T) {
	t.Parallel()
	s := newReleaseServer(t)
	data, err := os.ReadFile(cliPins(t))
	if err != nil {
		t.Fatal(err)
	}
	var upper strings.Builder
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 4 && !strings.HasPrefix(line, "#") {
			line = f[0] + " " + f[1] + " " + strings.ToUpper(f[2]) + " " + f[3] + "\n"
		}
		upper.WriteString(line)
	}
	pins := filepath.Join(t.TempDir(), "checksums.txt")
	if err := os.WriteFile(pins, []byte(upper.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	installed, log, err := s.installer(t, map[string]string{"S3LOCK_CHECKSUMS": pins})
	if err != nil {
		t.Fatalf("pins in upper case: %v\n%s; want the archive installed", err, log)
	}
	// The binary on PATH is checked against its pin in upper case too.
	got, log, err := s.installer(t, map[string]string{
		"S3LOCK_CHECKSUMS":    pins,
		"PATH":                installed + string(os.PathListSeparator) + os.Getenv("PATH"),
		"S3LOCK_DOWNLOAD_URL": s.srv.URL + "/nothing-here",
		"S3LOCK_SHA256":       strings.ToUpper(archiveSum(t)),
	})
	if err != nil || got != installed {
		t.Errorf("the pinned binary on PATH, pinned in upper case: printed %q, %v\n%s; want %s used", got, err, log, installed)
	}
}
