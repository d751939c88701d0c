package runguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Run identifies one Terraform run: its terraform process.
type Run struct {
	// PID is the terraform process's pid.
	PID int
	// Start is its start time in clock ticks since boot (/proc/PID/stat
	// field 22): a pid reused by another process has another start time.
	Start uint64
	// Boot is the host's boot id, so that a run is not confused with one of
	// an earlier boot.
	Boot string
}

// ErrUnsupported means this system cannot tell runs apart (no /proc): the
// provider then holds a lease per phase.
var ErrUnsupported = errors.New("runguard: needs Linux's /proc to tell Terraform runs apart")

// Parent returns the run of the process that started this one: the
// terraform process, for a provider that terraform started.
func Parent() (Run, error) { return Of(os.Getppid()) }

// Of returns the run of the process pid.
func Of(pid int) (Run, error) {
	start, err := startTime(pid)
	if err != nil {
		return Run{}, err
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return Run{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return Run{PID: pid, Start: start, Boot: strings.TrimSpace(string(boot))}, nil
}

// Alive reports whether the run's terraform process still exists (a zombie
// counts as gone). A /proc read that fails for another reason than the
// process being gone (out of file descriptors, say) does not end the run.
func (r Run) Alive() bool {
	start, err := startTime(r.PID)
	if err != nil {
		return !errors.Is(err, errGone)
	}
	return start == r.Start && !zombie(r.PID)
}

// errGone marks a process that no longer exists.
var errGone = errors.New("process is gone")

// String names the run, for messages.
func (r Run) String() string { return fmt.Sprintf("terraform process %d", r.PID) }

// dir is the directory of the user's run guards, readable by the user only:
// under $XDG_RUNTIME_DIR (the user's own, usually /run/user/UID) if set,
// else under the temporary directory, or /tmp when that is too long a path
// for a unix socket.
func dir() (string, error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = os.TempDir()
	}
	if len(base) > maxBaseLen {
		base = "/tmp"
	}
	d := filepath.Join(base, fmt.Sprintf("s3lock-run-%d", os.Getuid()))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("runguard: creating %s: %w", d, err)
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return "", fmt.Errorf("runguard: %w", err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownedByMe(fi) {
		return "", fmt.Errorf("runguard: %s must be a directory of user %d with mode 0700 (it is %s); "+
			"set XDG_RUNTIME_DIR or TMPDIR to a directory of your own, or S3LOCK_RUN_GUARD=off", d, os.Getuid(), fi.Mode())
	}
	return d, nil
}

// maxBaseLen keeps a guard's socket path (base + /s3lock-run-UID/ + 30
// characters) within the 108 bytes of a unix socket address.
const maxBaseLen = 60

// Usable reports whether guards can run here, and why not.
func Usable() error {
	_, err := dir()
	return err
}

// socket is the path of the run's guard socket.
func (r Run) socket() (string, error) {
	d, err := dir()
	if err != nil {
		return "", err
	}
	boot := r.Boot
	if len(boot) > 8 {
		boot = boot[:8]
	}
	return filepath.Join(d, fmt.Sprintf("%s-%d-%d.sock", boot, r.PID, r.Start)), nil
}

func startTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	// Fields after the command name: state is field 3, starttime field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("runguard: short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func zombie(pid int) bool {
	f, err := statFields(pid)
	return err == nil && len(f) > 0 && f[0] == "Z"
}

// statFields returns the fields of /proc/PID/stat after the command name
// (which may hold spaces): state first.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnsupported, serr)
		}
		return nil, fmt.Errorf("runguard: process %d: %w", pid, errGone)
	}
	if err != nil {
		return nil, fmt.Errorf("runguard: %w", err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("runguard: unreadable /proc/%d/stat", pid)
	}
	return strings.Fields(s[i+1:]), nil
}
