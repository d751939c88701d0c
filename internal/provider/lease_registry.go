package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// leaseRegistry holds the ephemeral leases this provider process opened for
// Terraform and Terraform has not closed yet. Each is a live *s3lock.Lease
// that renews itself in the background for as long as the run lasts, so a
// renewal that fails (a store that is briefly unreachable) is retried until
// the lease would lapse, whatever Terraform's own Renew schedule does.
//
// Terraform normally closes every ephemeral lease it opened, but not always:
// when a resource that depends on the lease fails, or the run is interrupted,
// Terraform 1.11 skips the close and stops the provider. A lease left open
// would keep others waiting, so the provider releases what is left when its
// server stops (see NewWithCleanup).
type leaseRegistry struct {
	mu   sync.Mutex
	open map[s3lock.Token]*s3lock.Lease
}

func newLeaseRegistry() *leaseRegistry {
	return &leaseRegistry{open: map[s3lock.Token]*s3lock.Lease{}}
}

// add records an opened lease.
func (r *leaseRegistry) add(l *s3lock.Lease) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[l.Token()] = l
}

// get returns the live lease of a token, if this process opened it.
func (r *leaseRegistry) get(t s3lock.Token) (*s3lock.Lease, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.open[t]
	return l, ok
}

// remove forgets a lease that was closed.
func (r *leaseRegistry) remove(t s3lock.Token) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.open, t)
}

// len returns how many leases are open.
func (r *leaseRegistry) len() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open)
}

// releaseAll releases every lease still open, concurrently, and forgets
// them. A lease already lost is not an error. It returns the leases it
// released and the errors of those it could not release.
func (r *leaseRegistry) releaseAll(ctx context.Context) ([]s3lock.Token, error) {
	r.mu.Lock()
	open := r.open
	r.open = map[s3lock.Token]*s3lock.Lease{}
	r.mu.Unlock()

	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		released []s3lock.Token
		errs     []error
	)
	for t, l := range open {
		wg.Go(func() {
			err := l.Release(ctx)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				released = append(released, t)
			case !errors.Is(err, s3lock.ErrLeaseLost):
				errs = append(errs, fmt.Errorf("lock %q in bucket %s (epoch %d): %w", t.Name, t.Bucket, t.Epoch, err))
			}
		})
	}
	wg.Wait()
	return released, errors.Join(errs...)
}
