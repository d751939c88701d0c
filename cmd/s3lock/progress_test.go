package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// In CI logs a wait prints one line when the holder changes and then one
// every few seconds, not one per observation.
func TestProgress_PlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "deploy", time.Minute, false, false)
	for range 5 {
		p.print(s3lock.HeldError{Holder: "alice", Epoch: 3, ExpiresIn: 41500 * time.Millisecond})
	}
	p.print(s3lock.HeldError{Holder: "bob", Epoch: 4, ExpiresIn: 10 * time.Second})
	p.lastPrint = p.lastPrint.Add(-plainInterval)
	p.print(s3lock.HeldError{Holder: "bob", Epoch: 4, ExpiresIn: 5 * time.Second})
	p.stop()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), buf.String())
	}
	want := `s3lock: waiting for lock "deploy": held by alice (epoch 3), lapses in 42s unless renewed`
	if !strings.HasPrefix(lines[0], want) || !strings.Contains(lines[1], "bob (epoch 4), lapses in 10s") ||
		!strings.Contains(lines[2], "lapses in 5s") || strings.Contains(buf.String(), "\r") {
		t.Fatalf("lines:\n%s", buf.String())
	}
}

// A waiter in line says how many wait before it, on a new line whenever that
// changes; the holder it last saw is named, without an expiry it no longer
// watches.
func TestProgress_PlaceInLine(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "deploy", time.Minute, false, false)
	p.print(s3lock.HeldError{Holder: "alice", Epoch: 3, ExpiresIn: 40 * time.Second, Ahead: 2})
	p.print(s3lock.HeldError{Holder: "alice", Epoch: 3, ExpiresIn: 40 * time.Second, Ahead: 2})
	p.print(s3lock.HeldError{Holder: "alice", Epoch: 3, ExpiresIn: 40 * time.Second, Ahead: 1})
	p.print(s3lock.HeldError{Ahead: 1, Key: "deploy/lock-line/", Queued: true}) // the lock was free, the line not
	p.print(s3lock.HeldError{Holder: "bob", Epoch: 4, ExpiresIn: 10 * time.Second})
	p.stop()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`s3lock: waiting for lock "deploy": 2 waiters ahead in line; last seen held by alice (epoch 3); waited`,
		`s3lock: waiting for lock "deploy": 1 waiter ahead in line; last seen held by alice (epoch 3); waited`,
		`s3lock: waiting for lock "deploy": 1 waiter ahead in line; waited`,
		`s3lock: waiting for lock "deploy": held by bob (epoch 4), lapses in 10s unless renewed; waited`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q; want it to start with %q", i+1, lines[i], w)
		}
	}
}
