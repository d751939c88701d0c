package runguard

import (
	"errors"
	"fmt"
	"math"
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

// parseStat parses /proc/PID/stat: the command name in parentheses (it may
// hold spaces and parentheses itself), then state (field 3), ppid (4), pgrp
// (5), session (6) and starttime (22, clock ticks since boot).
func parseStat(pid int, s string) (proc, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return proc{}, fmt.Errorf("runguard: unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return proc{}, fmt.Errorf("runguard: short /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	sid, err3 := strconv.Atoi(f[3])
	start, err4 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return proc{}, fmt.Errorf("runguard: unreadable /proc/%d/stat: %w", pid, err)
	}
	return proc{pid: pid, ppid: ppid, pgid: pgid, sid: sid, start: start, zombie: f[0] == "Z", name: s[open+1 : end]}, nil
}

// descendants returns pid's descendants, down the tree through each
// process's children (/proc/PID/task/TID/children; where the kernel lacks
// those files, from a scan of every process's parent).
func descendants(pid int) []proc {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); errors.Is(err, os.ErrNotExist) {
		if _, gone := os.Stat(fmt.Sprintf("/proc/%d", pid)); gone == nil {
			return descendantsOfSnapshot(pid)
		}
	}
	return descendantsFrom(pid, func(parent int) []proc {
		var kids []proc
		for _, kid := range childrenOf(parent) {
			if p, err := procOf(kid); err == nil {
				kids = append(kids, p)
			}
		}
		return kids
	})
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

// clockNow is now, in the unit of start times: clock ticks since boot
// (/proc/uptime in USER_HZ, which is 100 on the architectures Linux runs
// terraform on).
func clockNow() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return math.MaxUint64 // unknown: nothing counts as started after terraform ended
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.MaxUint64
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.MaxUint64
	}
	return uint64(up * userHZ)
}

// userHZ is the unit of /proc/PID/stat's times, per second.
const userHZ = 100

// startedByPlugin reports whether process pid was itself started by
// terraform's plugin machinery (its environment has the plugin handshake):
// a wrapper between terraform and the provider that did not exec it.
func startedByPlugin(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if strings.HasPrefix(kv, magicCookieKey+"=") {
			return true
		}
	}
	return false
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
