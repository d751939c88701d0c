package witness

import (
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// sampleEvery is how often Watch samples a lease's trust: often enough that
// each of its renewals is seen (they are a third of a lease apart).
const sampleEvery = 5 * time.Millisecond

// Watch samples, every few milliseconds until it ends or the returned stop
// is called, until when lease is trusted (its ExpiresAt), as claims that
// Check judges against the lease's writes. The lease's client must use the
// system clock. stop waits until sampling has stopped.
func (w *Witness) Watch(lease *s3lock.Lease) (stop func()) {
	lock, epoch, ok := parseKey(lease.Token().Key())
	if !ok {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			before := w.clock()
			left := time.Until(lease.State().ExpiresAt)
			if lease.Err() != nil {
				return
			}
			if left > 0 {
				w.claim(Claim{Lock: lock, Epoch: epoch, Holder: lease.State().Holder, At: w.clock(), Until: before + int64(left)})
			}
			select {
			case <-tick.C:
			case <-quit:
				return
			case <-lease.Done():
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

func (w *Witness) claim(c Claim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claims = append(w.claims, c)
}

// Claims returns the claims Watch sampled so far.
func (w *Witness) Claims() []Claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Claim(nil), w.claims...)
}
