// Package lockset takes several s3lock locks together, all or none: a job
// that changes the network and the database holds both, and two jobs that
// take {a, b} and {b, a} never wait for each other in a cycle.
//
// It is built on package s3lock's public API alone (a set is its locks'
// own acquisitions, one after another) and adds no object and no request to
// the protocol: s3lock/PROTOCOL.md §16 gives the rules.
//
//	set, err := lockset.Acquire(ctx, locks, []string{"net/prod", "db/prod"}, s3lock.WithWait(5*time.Minute))
//	if err != nil { ... } // nothing is held
//	defer set.Release(ctx)
//	// work; each lease's Token().Epoch fences its lock's writes; watch set.Done()
package lockset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// maxLocks bounds a lock set: a job that must hold more locks at once than
// this is better served by a lock over what they guard.
const maxLocks = 64

// releaseTimeout bounds the releases of a set that could not be taken, which
// run even when the caller's ctx has ended: long enough for a store's
// request timeout, short enough not to hang a caller that gave up.
const releaseTimeout = 30 * time.Second

// Set is the leases of several locks taken together by Acquire; it ends
// when any of its leases ends.
type Set struct {
	leases []*s3lock.Lease // in the set's order: the names sorted
	done   chan struct{}
	mu     sync.Mutex
	err    error // why the set ended; nil while every lease is held
	// One goroutine a lease watches it until it ends or Detach closes
	// detached; watching counts them.
	detached chan struct{}
	detach   sync.Once
	watching sync.WaitGroup
}

// Acquire acquires the locks names with c, each as c.Acquire does with opts
// (a WithWait bounds the wait for each lock; ctx bounds the whole), and
// returns holding all of them or none: what it took before an error or a
// timeout it releases before it returns.
//
// Every set takes its locks in one global order, the names sorted, so two
// sets that share locks never wait for each other in a cycle: a job taking
// {a, b} and another taking {b, a} both take a first, and the second to get
// it waits for the first set to end. While it waits for a held lock, a set
// holds the locks before it in that order and none after it: holding the
// earlier ones is what keeps a set from being overtaken forever by jobs
// that take them one at a time, and taking no later one means a set holds
// nothing longer than its own wait for the lock it lacks. The leases are
// renewed as Acquire's are (WithoutAutoRenew leaves it to the caller, for
// each lease). A lease taken before a wait that ends during it (lost, or
// not renewed) ends the wait at once: the set can no longer be held whole,
// and Acquire returns that lease's error, the others released.
//
// names must hold 1 to 64 distinct, valid lock names; bad names and options
// are refused before any request. Acquiring n free locks costs n
// acquisitions (3n requests).
func Acquire(ctx context.Context, c *s3lock.Client, names []string, opts ...s3lock.Option) (*Set, error) {
	order, err := Check(names)
	if err != nil {
		return nil, err
	}
	// The wait for a later lock ends as soon as a lease taken earlier
	// ends (lost, or not renewed): the set can no longer be held whole.
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	leases := make([]*s3lock.Lease, 0, len(order))
	for _, name := range order {
		l, err := c.Acquire(wctx, name, opts...)
		var ended *memberEnded
		switch {
		case err != nil && errors.As(context.Cause(wctx), &ended):
			return nil, abandon(ctx, order, leases, ended)
		case err != nil:
			return nil, abandon(ctx, order, leases, inner{err}) // it names the lock
		}
		leases = append(leases, l)
		go func() {
			select {
			case <-l.Done():
				stop(&memberEnded{name: name, err: l.Err()})
			case <-wctx.Done():
			}
		}()
	}
	// The last lease taken, or another, may have ended just now.
	for _, l := range leases {
		if err := l.Err(); err != nil {
			return nil, abandon(ctx, order, leases, &memberEnded{name: l.Token().Name, err: err})
		}
	}
	return newSet(leases), nil
}

// memberEnded is why a set's acquisition stopped: a lease it had taken
// ended while it waited for the others.
type memberEnded struct {
	name string
	err  error
}

func (e *memberEnded) Error() string {
	return fmt.Sprintf("lock %q ended while the set waited for the others: %v", e.name, inner{e.err})
}

func (e *memberEnded) Unwrap() error { return e.err }

// inner is an s3lock error inside a lock set's: its text without the
// package's prefix, which the set's own message already starts with.
type inner struct{ err error }

func (e inner) Error() string { return strings.TrimPrefix(e.err.Error(), "s3lock: ") }

func (e inner) Unwrap() error { return e.err }

// Check checks names as Acquire does, without a request, and returns them
// in the global order every set takes its locks in (the order of Leases):
// for a face that validates a configuration before it acquires, or that
// shows a set's locks in its order. An error matches s3lock.ErrInvalidConfig
// (no name, more than 64, a name twice) or is s3lock.ValidateName's.
func Check(names []string) ([]string, error) {
	switch {
	case len(names) == 0:
		return nil, fmt.Errorf("%w: a lock set needs at least one lock name", s3lock.ErrInvalidConfig)
	case len(names) > maxLocks:
		return nil, fmt.Errorf("%w: a lock set of %d locks is more than %d", s3lock.ErrInvalidConfig, len(names), maxLocks)
	}
	order := slices.Clone(names)
	slices.Sort(order)
	for i, name := range order {
		if err := s3lock.ValidateName(name); err != nil {
			return nil, err
		}
		if i > 0 && order[i-1] == name {
			return nil, fmt.Errorf("%w: lock %q is named twice in the lock set", s3lock.ErrInvalidConfig, name)
		}
	}
	return order, nil
}

// abandon releases the leases a failed Acquire took, latest first, even if
// ctx has ended, and returns why the set could not be taken.
func abandon(ctx context.Context, order []string, held []*s3lock.Lease, cause error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var failed []error
	for _, l := range slices.Backward(held) {
		if err := l.Release(rctx); err != nil && !errors.Is(err, s3lock.ErrLeaseLost) {
			failed = append(failed, err)
		}
	}
	taken := "it had taken none"
	switch {
	case len(failed) > 0:
		taken = fmt.Sprintf("releasing what it had taken (%s) failed; those leases lapse by themselves",
			strings.Join(order[:len(held)], ", "))
	case len(held) > 0:
		taken = fmt.Sprintf("what it had taken (%s) is released", strings.Join(order[:len(held)], ", "))
	}
	err := fmt.Errorf("s3lock: lock set {%s} not acquired, all or none: %w; %s", strings.Join(order, ", "), cause, taken)
	return errors.Join(append([]error{err}, failed...)...)
}

// newSet returns the set of leases and starts, for each, a goroutine that
// ends the set when the lease ends; each returns when its lease ends.
func newSet(leases []*s3lock.Lease) *Set {
	s := &Set{leases: leases, done: make(chan struct{}), detached: make(chan struct{})}
	for _, l := range leases {
		s.watching.Go(func() {
			select {
			case <-l.Done():
				s.end(l.Err())
			case <-s.detached:
			}
		})
	}
	return s
}

// end records why the set ended and closes Done, once.
func (s *Set) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

// Leases returns the set's leases, in the order they were taken (the names
// sorted): each with its Token (its lock's epoch, the fencing token of that
// lock's writes) and State. End them through the set (Release), not one by
// one: a lease Detached from the set leaves the set waiting for it.
func (s *Set) Leases() []*s3lock.Lease { return slices.Clone(s.leases) }

// Done returns a channel that is closed when the set ends: when any of its
// leases ends (released, or lost). Err says why.
//
// A lost lease ends the set, but the set's other leases stay held (and
// renewed) until Release: the work that ran under the set may still be
// running, and what it guards must not be taken by someone else before it
// stopped. Stop the work, then Release.
func (s *Set) Done() <-chan struct{} { return s.done }

// Err returns nil while every lease of the set is held, and otherwise why
// the first of them ended: s3lock.ErrReleased after Release, a
// *s3lock.LeaseLostError (matching s3lock.ErrLeaseLost) if one was lost.
// A later loss of another lease is not reported here; Release reports every
// lease it could not release.
func (s *Set) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Release releases every lease of the set, the latest taken first, each even
// if another fails, and returns their errors joined: a lease that was lost
// makes it match s3lock.ErrLeaseLost, since the work under the set may not
// have been exclusive.
func (s *Set) Release(ctx context.Context) error {
	var errs []error
	for _, l := range slices.Backward(s.leases) {
		if err := l.Release(ctx); err != nil && !errors.Is(err, s3lock.ErrReleased) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Detach stops the background renewal of every lease of the set, and the
// set's watch over them, without releasing them: the leases stay held in
// the store until they expire or someone resumes them with their Tokens
// (returned in the set's order) and releases them, as s3lock's
// Lease.Detach does for one lease. Use it to hand a set to another
// process; do not use the set afterwards. A lease lost before Detach is
// detached too, its Token returned like the others': check Err first.
func (s *Set) Detach() []s3lock.Token {
	s.detach.Do(func() { close(s.detached) })
	s.watching.Wait()
	tokens := make([]s3lock.Token, 0, len(s.leases))
	for _, l := range s.leases {
		tokens = append(tokens, l.Detach())
	}
	return tokens
}
