package runguard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/s3lock/terraform-provider-s3lock/internal/procfacts"
)

// Run identifies one Terraform run: its terraform process.
type Run struct {
	// PID is the terraform process's pid.
	PID int `json:"pid"`
	// Start is its start time (Linux: clock ticks since boot, /proc/PID/stat
	// field 22; macOS: microseconds since the epoch): a pid reused by
	// another process has another start time.
	Start uint64 `json:"start"`
	// Boot is the host's boot id, so that a run is not confused with one of
	// an earlier boot.
	Boot string `json:"boot"`
	// NS is the pid namespace the pid belongs to (Linux; empty on macOS):
	// runs in two containers that share /tmp may both be pid 1, started
	// at the same tick, on one boot.
	NS string `json:"ns"`
}

// The reasons a run cannot have a guard. The provider names them, with the
// way out, in the diagnostic of a lease that asks for the whole run.
var (
	// ErrUnsupported means this system offers no way to follow the
	// terraform process (the guard works on Linux and macOS).
	ErrUnsupported = errors.New("runguard: this system offers no way to follow the terraform process " +
		"(whole-run leases work on Linux and macOS)")
	// ErrNotTerraform means the provider was not started by Terraform or
	// OpenTofu (a debugger or a test harness serves it), so it cannot
	// tell which run it serves.
	ErrNotTerraform = errors.New("runguard: the provider was not started by Terraform or OpenTofu")
	// ErrTurnedOff means S3LOCK_RUN_GUARD turned the guard off.
	ErrTurnedOff = errors.New("runguard: turned off by " + TurnOffEnv)
	// ErrDirUnusable means the directory of the guards' sockets cannot be
	// used safely.
	ErrDirUnusable = errors.New("runguard: the run guard's directory is unusable")
)

// TurnOffEnv turns the run guard off ("off", "0" or "false"): ephemeral
// leases that ask for the whole run then fail, those that ask for a phase
// work.
const TurnOffEnv = "S3LOCK_RUN_GUARD"

// magicCookieKey is the variable Terraform and OpenTofu set for the provider
// processes they start (the plugin handshake).
const magicCookieKey = "TF_PLUGIN_MAGIC_COOKIE"

// ForProvider returns the run of the provider process that calls it — its
// parent, the terraform process — or why it has none: it was not started by
// Terraform (or is served for a debugger, debug), the guard is turned off,
// the system cannot follow processes, or the guards' directory is unsafe.
func ForProvider(debug bool) (Run, error) {
	switch v := os.Getenv(TurnOffEnv); {
	case debug:
		return Run{}, fmt.Errorf("%w: it runs in debug mode (-debug), serving any terraform that attaches", ErrNotTerraform)
	case os.Getenv(magicCookieKey) == "":
		return Run{}, fmt.Errorf("%w: it is served in-process (a test harness) or by hand", ErrNotTerraform)
	case v == "off" || v == "0" || v == "false":
		return Run{}, fmt.Errorf("%w (%s=%s in terraform's environment)", ErrTurnedOff, TurnOffEnv, v)
	}
	r, err := Of(os.Getppid())
	if err != nil {
		return Run{}, err
	}
	if procfacts.HasEnv(r.PID, magicCookieKey) {
		// A wrapper script between terraform and the provider that does
		// not exec it: each phase would be a run of its own.
		return Run{}, fmt.Errorf("%w directly: its parent, process %d, was itself started by terraform's plugin "+
			"machinery (a wrapper that runs the provider without exec; make it exec the provider)", ErrNotTerraform, r.PID)
	}
	if _, err := r.socket(); err != nil {
		return Run{}, err
	}
	return r, nil
}

// Of returns the run of the process pid (of this pid namespace).
func Of(pid int) (Run, error) {
	p, err := procOf(pid)
	if err != nil {
		return Run{}, err
	}
	boot, err := procfacts.BootID()
	if err != nil {
		return Run{}, guardErr(err)
	}
	ns, err := procfacts.PIDNamespace()
	if err != nil {
		return Run{}, guardErr(err)
	}
	return Run{PID: pid, Start: p.Start, Boot: boot, NS: ns}, nil
}

// Alive reports whether the run's terraform process still exists (a zombie
// counts as gone). A read that fails for another reason than the process
// being gone (out of file descriptors, say) does not end the run.
func (r Run) Alive() bool {
	p, err := procOf(r.PID)
	if err != nil {
		return !errors.Is(err, procfacts.ErrGone)
	}
	return p.Start == r.Start && !p.Zombie
}

// EndsWithTerraform says why the run's guard will be ended together with
// terraform, or returns "": terraform is the init process of its pid
// namespace (a container's entrypoint), or the only child of a minimal init
// that exits with it (tini, which is Docker's --init, dumb-init, catatonit).
// When the init exits, the kernel ends every other process of the namespace
// at once, the guard included, which can then not release the run's
// leases: they lapse.
func (r Run) EndsWithTerraform() string {
	if r.PID == 1 {
		return "terraform is the init process (pid 1) of its container"
	}
	p, err := procOf(r.PID)
	if err != nil || p.PPID != 1 {
		return ""
	}
	if init, err := procOf(1); err == nil && minimalInits[init.Name] {
		return fmt.Sprintf("terraform runs under %s, the init process of its container, which exits as soon as terraform does", init.Name)
	}
	return ""
}

// minimalInits are init processes that exit when their one child does.
var minimalInits = map[string]bool{"tini": true, "docker-init": true, "dumb-init": true, "catatonit": true}

// String names the run, for messages.
func (r Run) String() string { return fmt.Sprintf("terraform process %d", r.PID) }

// args are the guard's command-line arguments after GuardArg.
func (r Run) args() []string {
	return []string{strconv.Itoa(r.PID), strconv.FormatUint(r.Start, 10), r.Boot, r.NS}
}

// parseRun is the inverse of args.
func parseRun(args []string) (Run, error) {
	if len(args) != 4 {
		return Run{}, errors.New("usage: " + GuardArg + " PID START BOOT PIDNS (started by the provider only)")
	}
	pid, err1 := strconv.Atoi(args[0])
	start, err2 := strconv.ParseUint(args[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Run{}, fmt.Errorf("bad run %q: %w", args, err)
	}
	return Run{PID: pid, Start: start, Boot: args[2], NS: args[3]}, nil
}

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
		return "", fmt.Errorf("%w: creating %s: %w", ErrDirUnusable, d, err)
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrDirUnusable, err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownedByMe(fi) {
		return "", fmt.Errorf("%w: %s must be a directory of user %d with mode 0700 (it is %s); "+
			"set XDG_RUNTIME_DIR or TMPDIR to a directory of your own", ErrDirUnusable, d, os.Getuid(), fi.Mode())
	}
	return d, nil
}

// maxBaseLen keeps a guard's socket path (base, "/s3lock-run-UID/" with a
// uid of up to 10 digits, "PID-DIGEST.sock" with a pid of up to 7) within
// maxSocketPath: a longer base is replaced by /tmp.
const maxBaseLen = maxSocketPath - len("/s3lock-run-4294967295/") - len("4194304-0123456789ab.sock")

// socket is the path of the run's guard socket: named after the run's pid
// and a digest of everything that identifies it (start time, boot, pid
// namespace), short enough for a socket address.
func (r Run) socket() (string, error) {
	d, err := dir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%d\x00%s\x00%s", r.PID, r.Start, r.Boot, r.NS)))
	sock := filepath.Join(d, fmt.Sprintf("%d-%s.sock", r.PID, hex.EncodeToString(sum[:6])))
	if len(sock) > maxSocketPath {
		return "", fmt.Errorf("%w: the run guard's socket %s is longer than the %d bytes a unix socket address allows; "+
			"set XDG_RUNTIME_DIR or TMPDIR to a shorter directory of your own", ErrDirUnusable, sock, maxSocketPath)
	}
	return sock, nil
}

// maxSocketPath is the longest unix socket path on every system the guard
// runs on (macOS: 104 bytes with the terminating NUL; Linux: 108).
const maxSocketPath = 103
