// Package testkit holds what the test packages of the repository share
// beyond their stores and harnesses (in the packages below it): waiting for
// a condition, and a buffer that a test reads while a process writes it.
//
// The kits under internal/testkit (s3server, s3test, tfharness, witness) are
// in the main module, not in the lab's (lab/), because the main module's own
// tests use them, and those tests cannot import the lab's module (it
// requires the main module); the lab uses them too. Nothing that ships
// imports them.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// poll is how often Eventually looks at its condition.
const poll = 20 * time.Millisecond

// Eventually polls cond until it holds, failing the test after limit. The
// limit is a safeguard against hangs, never an assertion on speed: give it
// room (a test that measures time belongs in a benchmark).
func Eventually(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(poll)
	}
}

// Buffer collects what a process writes (an exec.Cmd's Stdout or Stderr)
// for a test to read while it runs. With Keep > 0 it keeps about the last
// Keep bytes only (a long-running server's log: enough to explain a
// failure). The zero value is ready to use.
type Buffer struct {
	Keep int

	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Keep > 0 && b.buf.Len() > b.Keep {
		tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-b.Keep/2:]...)
		b.buf.Reset()
		b.buf.Write(tail)
	}
	return b.buf.Write(p)
}

// String returns what was written (what was kept, with Keep).
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
