package runguard

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The process facts the guard needs, from Linux's /proc.

// procOf reads what the guard needs of process pid from /proc/PID/stat. A
// process that does not exist is errGone; a system without /proc is
// ErrUnsupported.
func procOf(pid int) (proc, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return proc{}, fmt.Errorf("%w: %w", ErrUnsupported, serr)
		}
		return proc{}, fmt.Errorf("runguard: process %d: %w", pid, errGone)
	}
	if err != nil {
		return proc{}, fmt.Errorf("runguard: %w", err)
	}
	return parseStat(pid, string(b))
}

// parseStat parses /proc/PID/stat: the fields after the command name (which
// may hold spaces and parentheses) are state (field 3), ppid (4), pgrp (5),
// and starttime (22, clock ticks since boot).
func parseStat(pid int, s string) (proc, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return proc{}, fmt.Errorf("runguard: unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return proc{}, fmt.Errorf("runguard: short /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return proc{}, fmt.Errorf("runguard: unreadable /proc/%d/stat: %w", pid, err)
	}
	return proc{pid: pid, ppid: ppid, pgid: pgid, start: start, zombie: f[0] == "Z"}, nil
}

// childrenOf returns the pids of pid's children (every thread's).
func childrenOf(pid int) []int {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if kid, err := strconv.Atoi(f); err == nil {
				out = append(out, kid)
			}
		}
	}
	return out
}

// processes returns every process of this pid namespace that could be read.
func processes() ([]proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := procOf(pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// bootID identifies this boot of the host.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// pidNamespace identifies this process's pid namespace ("pid:[4026531836]"):
// two containers have different ones even when both run terraform as pid 1
// and share /tmp.
func pidNamespace() (string, error) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", fmt.Errorf("runguard: reading this process's pid namespace: %w", err)
	}
	return ns, nil
}

// peerOf returns the pid and uid of the process at the other end of c, as
// the kernel saw them when it connected. A process of another pid namespace
// that this one cannot see has pid 0.
func peerOf(c *net.UnixConn) (pid, uid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, fmt.Errorf("runguard: reading the peer's credentials: %w", serr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// tellProcess writes msg on process pid's standard error (terraform's: a
// terminal, or the pipe a CI runner reads).
func tellProcess(pid int, msg string) error {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", pid), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(msg)
	return errors.Join(err, f.Close())
}

// initName is the command name of this pid namespace's init process.
func initName() string {
	b, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
