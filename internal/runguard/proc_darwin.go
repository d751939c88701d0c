package runguard

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// The process facts the guard needs, from macOS's sysctl (kern.proc). This
// file is built and vetted by CI (GOOS=darwin) but runs only on macOS, which
// CI does not: see the ephemeral lease's documentation.

// szomb is a zombie's p_stat (sys/proc.h).
const szomb = 5

// procOf reads what the guard needs of process pid (sysctl kern.proc.pid).
// A process that does not exist is errGone.
func procOf(pid int) (proc, error) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	switch {
	case errors.Is(err, unix.EIO), errors.Is(err, unix.ESRCH):
		// The kernel answers an unknown pid with no entry at all.
		return proc{}, fmt.Errorf("runguard: process %d: %w", pid, errGone)
	case err != nil:
		return proc{}, fmt.Errorf("runguard: sysctl kern.proc.pid %d: %w", pid, err)
	case int(k.Proc.P_pid) != pid:
		return proc{}, fmt.Errorf("runguard: process %d: %w", pid, errGone)
	}
	p := procFromKinfo(k)
	if sid, err := unix.Getsid(pid); err == nil {
		p.sid = sid
	}
	return p, nil
}

// procFromKinfo keeps what the guard needs of a kinfo_proc: its start time
// in microseconds since the epoch (a reused pid has another).
func procFromKinfo(k *unix.KinfoProc) proc {
	tv := k.Proc.P_starttime
	return proc{pid: int(k.Proc.P_pid), ppid: int(k.Eproc.Ppid), pgid: int(k.Eproc.Pgid),
		start: uint64(tv.Sec)*1_000_000 + uint64(tv.Usec), zombie: k.Proc.P_stat == szomb,
		name: unix.ByteSliceToString(k.Proc.P_comm[:])}
}

// clockNow is now, in the unit of start times: microseconds since the
// epoch.
func clockNow() uint64 { return uint64(time.Now().UnixMicro()) }

// startedByPlugin: reading another process's environment takes
// KERN_PROCARGS2 on macOS; not done (see the ephemeral lease's docs).
func startedByPlugin(int) bool { return false }

// processes returns every process (sysctl kern.proc.all).
func processes() ([]proc, error) {
	all, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("runguard: sysctl kern.proc.all: %w", err)
	}
	out := make([]proc, 0, len(all))
	for i := range all {
		out = append(out, procFromKinfo(&all[i]))
	}
	return out, nil
}

// descendants returns pid's descendants, from one snapshot of every
// process (sysctl kern.proc.all).
func descendants(pid int) []proc { return descendantsOfSnapshot(pid) }

// bootID identifies this boot of the host (kern.bootsessionuuid).
func bootID() (string, error) {
	id, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return "", fmt.Errorf("%w: sysctl kern.bootsessionuuid: %w", ErrUnsupported, err)
	}
	return id, nil
}

// pidNamespace: macOS has one pid space.
func pidNamespace() (string, error) { return "", nil }

// peerOf returns the pid (LOCAL_PEERPID) and uid (LOCAL_PEERCRED) of the
// process at the other end of c.
func peerOf(c *net.UnixConn) (pid, uid int, err error) {
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
		return 0, 0, fmt.Errorf("runguard: reading the peer's credentials: %w", err)
	}
	return pid, int(cred.Uid), nil
}

// tellProcess: macOS offers no path to another process's standard error;
// the guard's log (and the next operation on the lease) says why.
func tellProcess(int, string) error {
	return errors.New("macOS offers no way to write to terraform's standard error")
}
