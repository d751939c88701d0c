package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// progress reports a wait for a held lock on stderr: on a terminal, one line
// rewritten in place; elsewhere, a plain line when the holder or the number
// of waiters ahead in line changes, and every plainInterval.
type progress struct {
	w     io.Writer
	tty   bool
	width int // terminal width; 0 if unknown
	name  string
	limit time.Duration
	start time.Time
	// lock and lockStart are the lock the wait is for and when it began:
	// a lock set waits for its locks one after another, --wait for each.
	lock      string
	lockStart time.Time

	events chan s3lock.HeldError
	done   chan struct{}
	once   sync.Once
	held   atomic.Bool // observe was called: the lock was found held

	// printer state
	shown      bool // a live line is on the terminal
	lastPrint  time.Time
	lastHolder string
	lastEpoch  uint64
	lastAhead  int
	lastKey    string
	// sdkWords says that the SDK's sentence tells best what the wait is
	// for: which slot of a slot lock runs out first (--slots), or whether
	// the holder a shared acquirer waits for is a writer that itself
	// waits for shared holders (--shared).
	sdkWords bool
}

// newProgress starts a reporter for a wait of up to limit for the lock name;
// sdkWords (see progress) for --slots N > 1 and --shared. quiet reporters
// print nothing.
func newProgress(w io.Writer, name string, limit time.Duration, quiet, sdkWords bool) *progress {
	p := &progress{w: w, name: name, limit: limit, start: time.Now(), sdkWords: sdkWords,
		events: make(chan s3lock.HeldError, 1), done: make(chan struct{})}
	if quiet {
		p.w = io.Discard
	} else if isTerminal(w) {
		p.tty = true
		if width, _, err := term.GetSize(int(w.(*os.File).Fd())); err == nil {
			p.width = width
		}
	}
	go p.loop()
	return p
}

// observe is the s3lock.WithWaitObserver callback. It never blocks: an
// event that the printer has not taken yet is replaced by the newer one.
func (p *progress) observe(h *s3lock.HeldError) {
	p.held.Store(true)
	ev := *h
	for {
		select {
		case p.events <- ev:
			return
		default:
		}
		select {
		case <-p.events:
		default:
		}
	}
}

func (p *progress) loop() {
	defer close(p.done)
	for ev := range p.events {
		p.print(ev)
	}
}

func (p *progress) print(h s3lock.HeldError) {
	now := time.Now()
	changed := h.Holder != p.lastHolder || h.Epoch != p.lastEpoch || h.Ahead != p.lastAhead || h.Key != p.lastKey
	if !p.tty && !changed && now.Sub(p.lastPrint) < plainInterval {
		return
	}
	p.lastPrint, p.lastHolder, p.lastEpoch, p.lastAhead, p.lastKey = now, h.Holder, h.Epoch, h.Ahead, h.Key
	name := p.name
	if h.Name != "" {
		name = h.Name // a lock set's: the one it waits for
	}
	if name != p.lock {
		p.lock, p.lockStart = name, now
		if p.lock == p.name || p.lockStart.Sub(p.start) < time.Second {
			p.lockStart = p.start // one lock (or the set's first): its wait began with the progress
		}
	}
	waited := now.Sub(p.lockStart).Round(time.Second)
	line := fmt.Sprintf("s3lock: waiting for lock %q: %s; waited %s of %s", name, waitingText(h, p.sdkWords), waited, p.limit)
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	if p.width > 1 && len(line) >= p.width {
		line = line[:p.width-2] + "…"
	}
	fmt.Fprint(p.w, "\r\033[K"+line)
	p.shown = true
}

// waitingText says what a wait is waiting for: the holder, or while others
// are ahead in line, how many (the holder is then as the waiter last read
// it, and its expiry is not shown: it is not watched until this waiter is
// next in line).
func waitingText(h s3lock.HeldError, sdkWords bool) string {
	switch {
	case h.Queued: // the lock was free, but others were in line
		return waitersText(h.Ahead) + " ahead in line"
	case h.Ahead > 0:
		return fmt.Sprintf("%s ahead in line; last seen held by %s (epoch %d)", waitersText(h.Ahead), holderText(h.Holder), h.Epoch)
	case sdkWords: // a slot lock's, or a shared acquirer's: see progress.sdkWords
		return sdkText(&h)
	case h.Shared: // each share lapses on its own: no one expiry to show
		return "held by " + heldByText(&h)
	}
	return fmt.Sprintf("held by %s, lapses in %s unless renewed", heldByText(&h), roundUp(h.ExpiresIn))
}

// stop ends the reporting and clears the live line.
func (p *progress) stop() {
	p.once.Do(func() {
		close(p.events)
		<-p.done
		if p.shown {
			fmt.Fprint(p.w, "\r\033[K")
		}
	})
}

// waited says how long the wait took, for the final message: 0 if the lock
// was never found held.
func (p *progress) waited() time.Duration {
	if !p.held.Load() {
		return 0
	}
	return time.Since(p.start)
}

// isTerminal reports whether w (a writer or a reader) is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// roundUp rounds a positive duration up to whole seconds, so "lapses in 0s"
// is not shown while time is left.
func roundUp(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// holderText quotes a holder for messages.
func holderText(h string) string {
	if h == "" {
		return "an unknown holder"
	}
	if strings.ContainsAny(h, " \t") {
		return fmt.Sprintf("%q", h)
	}
	return h
}
