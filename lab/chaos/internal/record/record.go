// Package record is the history the chaos suite's processes write: one JSON
// object per line, appended by each process to a file of its own, stamped
// with CLOCK_MONOTONIC, which every process on the host reads alike (Go's
// own monotonic readings start at each process's start and cannot be
// compared across processes).
package record

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Kind says what a record reports.
type Kind string

// The kinds of records.
const (
	// Start: a worker process started (Pid; Epoch for the command of an
	// `s3lock run`).
	Start Kind = "start"
	// Acquired: an SDK worker acquired a lease (Epoch, Until).
	Acquired Kind = "acquired"
	// Ended: an SDK worker's lease ended (Epoch; Detail: released, or why
	// it was lost).
	Ended Kind = "ended"
	// Begin: a critical section began (CS, Epoch, Until).
	Begin Kind = "cs-begin"
	// ReadCall and ReadReturn bracket the read of the register (Value, or
	// Err if the read failed).
	ReadCall   Kind = "read-call"
	ReadReturn Kind = "read-return"
	// WriteCall and WriteReturn bracket the write of the register (From,
	// To; Outcome).
	WriteCall   Kind = "write-call"
	WriteReturn Kind = "write-return"
	// End: a critical section ended (Until, refreshed if still trusted).
	End Kind = "cs-end"
	// ClockJump: the worker's clock jumped (Detail: by how much).
	ClockJump Kind = "clock-jump"
	// Exit: the worker is exiting normally (Detail: why).
	Exit Kind = "exit"
)

// Outcome is how a write of the register ended.
type Outcome string

// The outcomes of a write.
const (
	// OK: the store confirmed the write.
	OK Outcome = "ok"
	// Failed: the write certainly did not happen (refused by the fence or
	// by the conditional write before anything was sent, or never sent).
	Failed Outcome = "failed"
	// Unknown: the write was sent and may or may not have happened.
	Unknown Outcome = "unknown"
)

// Forever is the Until of a worker that trusts its lease without bound: the
// deliberately broken worker.
const Forever int64 = math.MaxInt64

// Record is one line of a history.
type Record struct {
	Proc string `json:"proc"`
	Kind Kind   `json:"kind"`
	// Mono is when it happened: CLOCK_MONOTONIC in nanoseconds.
	Mono int64 `json:"mono"`
	Pid  int   `json:"pid,omitempty"`
	// CS numbers the process's critical sections from 1.
	CS    int    `json:"cs,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
	// Shared marks the records of a shared lease (s3lock.WithShared):
	// its sections read the register and never write it, and may overlap
	// other shared sections.
	Shared bool `json:"shared,omitempty"`
	// Until is when the worker stops trusting its lease (CLOCK_MONOTONIC),
	// as its last check found; 0 when the worker cannot know (the command
	// of an `s3lock run`, which counts as trusted while it runs); Forever
	// for the broken worker.
	Until int64 `json:"until,omitempty"`
	// Value is the counter the register held when read.
	Value int64 `json:"value"`
	// From and To are the write's read value and new value.
	From    int64   `json:"from"`
	To      int64   `json:"to"`
	Outcome Outcome `json:"outcome,omitempty"`
	Err     string  `json:"err,omitempty"`
	Detail  string  `json:"detail,omitempty"`
}

// Now reads CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail on Linux; a zero reading would show as
	// an absurd timestamp in the history.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Writer appends one process's records to its file.
type Writer struct {
	proc string
	mu   sync.Mutex
	f    *os.File
}

// Create creates the history file at path for the process proc; it fails if
// the file exists, so two processes never share one.
func Create(path, proc string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return &Writer{proc: proc, f: f}, nil
}

// Write appends r, stamped with the process's name and, unless r has one,
// the current time. Each record is one write(2), so a process killed at any
// moment leaves whole lines behind (at most the last one torn).
func (w *Writer) Write(r Record) error {
	r.Proc = w.proc
	if r.Mono == 0 {
		r.Mono = Now()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// ReadDir reads every history file (*.jsonl) in dir and returns their
// records ordered by time. A torn last line (its process was killed while
// writing it) is skipped and counted in torn.
func ReadDir(dir string) (recs []Record, torn int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	for _, path := range files {
		got, t, err := readFile(path)
		if err != nil {
			return nil, 0, err
		}
		recs = append(recs, got...)
		torn += t
	}
	slices.SortStableFunc(recs, func(a, b Record) int { return cmp.Compare(a.Mono, b.Mono) })
	return recs, torn, nil
}

func readFile(path string) ([]Record, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var recs []Record
	var bad []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			bad = append(bad, n)
			continue
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("record: reading %s: %w", path, err)
	}
	switch {
	case len(bad) == 0:
		return recs, 0, nil
	case len(bad) == 1 && bad[0] == n:
		return recs, 1, nil
	}
	return nil, 0, fmt.Errorf("record: %s: unparsable lines %v (only a torn last line is expected)", path, bad)
}
