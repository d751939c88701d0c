package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// leaseRegistry remembers the ephemeral leases this provider process opened
// for Terraform and Terraform has not closed yet.
//
// Terraform normally closes every ephemeral lease it opened, but not always:
// when a resource that depends on the lease fails, or the run is interrupted,
// Terraform 1.11 skips the close and stops the provider. A lease left open would keep others waiting
// for its whole lease_duration although nothing renews it any more, so the
// provider releases what is left when its server stops (see NewWithCleanup).
type leaseRegistry struct {
	mu   sync.Mutex
	open map[s3lock.Token]*clientFactory
}

func newLeaseRegistry() *leaseRegistry {
	return &leaseRegistry{open: map[s3lock.Token]*clientFactory{}}
}

// add records an opened lease.
func (r *leaseRegistry) add(f *clientFactory, t s3lock.Token) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[t] = f
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
	r.open = map[s3lock.Token]*clientFactory{}
	r.mu.Unlock()

	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		released []s3lock.Token
		errs     []error
	)
	for t, f := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := releaseToken(ctx, f, t)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				released = append(released, t)
			case !isLost(err):
				errs = append(errs, fmt.Errorf("lock %q in bucket %s (epoch %d): %w", t.Name, t.Bucket, t.Epoch, err))
			}
		}()
	}
	wg.Wait()
	return released, errors.Join(errs...)
}

// releaseToken resumes the lease of a token and releases it.
func releaseToken(ctx context.Context, f *clientFactory, t s3lock.Token) error {
	c, err := f.client(ctx, t.Bucket)
	if err != nil {
		return err
	}
	lease, err := c.Resume(ctx, t, s3lock.WithoutAutoRenew())
	if err != nil {
		return err
	}
	return lease.Release(ctx)
}
