package procfacts

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

// The process facts of Linux, from /proc.

// Of reads process pid from /proc/PID/stat. A process that does not exist
// is ErrGone; a system without /proc is an *UnsupportedError.
func Of(pid int) (Process, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return Process{}, unsupported(serr)
		}
		return Process{}, gone(pid)
	}
	if err != nil {
		return Process{}, fmt.Errorf("procfacts: %w", err)
	}
	return parseStat(pid, string(b))
}

// parseStat parses /proc/PID/stat: the command name in parentheses (it may
// hold spaces and parentheses itself), then state (field 3), ppid (4), pgrp
// (5), session (6) and starttime (22, clock ticks since boot).
func parseStat(pid int, s string) (Process, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Process{}, fmt.Errorf("procfacts: unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return Process{}, fmt.Errorf("procfacts: short /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	sid, err3 := strconv.Atoi(f[3])
	start, err4 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Process{}, fmt.Errorf("procfacts: unreadable /proc/%d/stat: %w", pid, err)
	}
	return Process{PID: pid, PPID: ppid, PGID: pgid, SID: sid, Start: start, Zombie: f[0] == "Z",
		Name: s[open+1 : end]}, nil
}

// descendants walks /proc/PID/task/TID/children; where the kernel lacks
// those files, it reads a snapshot of every process's parent.
func descendants(pid int) []Process {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); errors.Is(err, os.ErrNotExist) {
		if _, gone := os.Stat(fmt.Sprintf("/proc/%d", pid)); gone == nil {
			return descendantsOfSnapshot(pid)
		}
	}
	return descendantsFrom(pid, func(parent int) []Process {
		var kids []Process
		for _, kid := range childrenOf(parent) {
			if p, err := Of(kid); err == nil {
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

// All returns every process of this pid namespace that could be read.
func All() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, unsupported(err)
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := Of(pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Now is now, in the unit of start times: clock ticks since boot
// (/proc/uptime in USER_HZ, which is 100 on the architectures Linux runs
// terraform on); math.MaxUint64 when unknown (nothing counts as started
// after it).
func Now() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return math.MaxUint64
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

// HasEnv reports whether process pid's environment (/proc/PID/environ)
// sets key; false when it cannot be read.
func HasEnv(pid int, key string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// BootID identifies this boot of the host.
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", unsupported(err)
	}
	return strings.TrimSpace(string(b)), nil
}

// PIDNamespace identifies this process's pid namespace ("pid:[4026531836]"):
// two containers have different ones even when both run a pid 1 and share
// /tmp.
func PIDNamespace() (string, error) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", fmt.Errorf("procfacts: reading this process's pid namespace: %w", err)
	}
	return ns, nil
}

// Peer returns the pid and uid of the process at the other end of c, as
// the kernel saw them when it connected. A process of another pid namespace
// that this one cannot see has pid 0.
func Peer(c *net.UnixConn) (pid, uid int, err error) {
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
		return 0, 0, fmt.Errorf("procfacts: reading the peer's credentials: %w", serr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// Stderr opens process pid's standard error for appending (/proc/PID/fd/2:
// a terminal, or the pipe a CI runner reads).
func Stderr(pid int) (*os.File, error) {
	return os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", pid), os.O_WRONLY|os.O_APPEND, 0)
}

// OpenFDs returns the numbers of this process's open file descriptors
// (/proc/self/fd).
func OpenFDs() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, unsupported(err)
	}
	var fds []int
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds, nil
}
