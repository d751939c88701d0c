package provider

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
)

// Ctrl-C in a terminal interrupts the whole foreground process group: the
// provider gets SIGINT as Terraform does. Terraform cannot cancel a call it
// made to a provider (it calls with the provider's own context), so a state
// lock that waits for another run would hold Terraform up for the rest of
// wait_timeout; the provider ends such waits itself when it is interrupted.
// go-plugin's server ignores SIGINT otherwise, as before.

// interrupts is a broadcast of SIGINT: each signal closes the current
// channel and starts another.
type interrupts struct {
	mu sync.Mutex
	ch chan struct{}
}

// providerInterrupts is set by HandleInterrupts (the provider's main);
// nil in a test process, whose SIGINT is the test runner's.
var providerInterrupts *interrupts

// HandleInterrupts makes SIGINT end the waits of this process's state
// locks. The provider's main calls it; tests do not.
func HandleInterrupts() {
	in := &interrupts{ch: make(chan struct{})}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	go func() {
		for range sig {
			in.mu.Lock()
			close(in.ch)
			in.ch = make(chan struct{})
			in.mu.Unlock()
		}
	}()
	providerInterrupts = in
}

// errInterrupted is the cause of a context that interruptible canceled.
var errInterrupted = errors.New("interrupted (SIGINT, Ctrl-C)")

// interruptible returns ctx, canceled with errInterrupted when the process
// is interrupted (HandleInterrupts) before stop is called.
func interruptible(ctx context.Context) (_ context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if in := providerInterrupts; in != nil {
		in.mu.Lock()
		ch := in.ch
		in.mu.Unlock()
		go func() {
			select {
			case <-ch:
				cancel(errInterrupted)
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { cancel(nil) }
}
