package procfacts

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The process facts of macOS, from sysctl (kern.proc). This file is built
// and vetted by CI (GOOS=darwin) but runs only on macOS, which CI does not:
// see the ephemeral lease's documentation.

// szomb is a zombie's p_stat (sys/proc.h).
const szomb = 5

// Of reads process pid (sysctl kern.proc.pid). A process that does not
// exist is ErrGone.
func Of(pid int) (Process, error) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	switch {
	case errors.Is(err, unix.EIO), errors.Is(err, unix.ESRCH):
		// The kernel answers an unknown pid with no entry at all.
		return Process{}, gone(pid)
	case err != nil:
		return Process{}, fmt.Errorf("procfacts: sysctl kern.proc.pid %d: %w", pid, err)
	case int(k.Proc.P_pid) != pid:
		return Process{}, gone(pid)
	}
	p := fromKinfo(k)
	if sid, err := unix.Getsid(pid); err == nil {
		p.SID = sid
	}
	return p, nil
}

// fromKinfo keeps what Process tells of a kinfo_proc: its start time in
// microseconds since the epoch (a reused pid has another).
func fromKinfo(k *unix.KinfoProc) Process {
	tv := k.Proc.P_starttime
	return Process{PID: int(k.Proc.P_pid), PPID: int(k.Eproc.Ppid), PGID: int(k.Eproc.Pgid),
		Start: uint64(tv.Sec)*1_000_000 + uint64(tv.Usec), Zombie: k.Proc.P_stat == szomb,
		Name: unix.ByteSliceToString(k.Proc.P_comm[:])}
}

// Now is now, in the unit of start times: microseconds since the epoch.
func Now() uint64 { return uint64(time.Now().UnixMicro()) }

// HasEnv: reading another process's environment takes KERN_PROCARGS2 on
// macOS; not done (see the ephemeral lease's docs), so it is always false.
func HasEnv(int, string) bool { return false }

// All returns every process (sysctl kern.proc.all).
func All() ([]Process, error) {
	all, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("procfacts: sysctl kern.proc.all: %w", err)
	}
	out := make([]Process, 0, len(all))
	for i := range all {
		out = append(out, fromKinfo(&all[i]))
	}
	return out, nil
}

// descendants reads one snapshot of every process (sysctl kern.proc.all).
func descendants(pid int) []Process { return descendantsOfSnapshot(pid) }

// BootID identifies this boot of the host (kern.bootsessionuuid).
func BootID() (string, error) {
	id, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return "", unsupported(fmt.Errorf("sysctl kern.bootsessionuuid: %w", err))
	}
	return id, nil
}

// PIDNamespace: macOS has one pid space.
func PIDNamespace() (string, error) { return "", nil }

// Peer returns the pid (LOCAL_PEERPID) and uid (LOCAL_PEERCRED) of the
// process at the other end of c.
func Peer(c *net.UnixConn) (pid, uid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Xucred
	var perr, cerr error
	if err := raw.Control(func(fd uintptr) {
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if err := errors.Join(perr, cerr); err != nil {
		return 0, 0, fmt.Errorf("procfacts: reading the peer's credentials: %w", err)
	}
	return pid, int(cred.Uid), nil
}

// Stderr: macOS offers no path to another process's standard error.
func Stderr(int) (*os.File, error) {
	return nil, errors.New("macOS offers no way to write to terraform's standard error")
}

// OpenFDs: not read on macOS.
func OpenFDs() ([]int, error) { return nil, unsupported(errors.New("macOS has no /proc/self/fd")) }
