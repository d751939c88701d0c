package tfstate

import (
	stdbytes "bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// sealAttempts bounds how often Lock re-reads a state that keeps changing
// between its read and its seal.
const sealAttempts = 5

// Metadata keys of a state lock's lease: what a waiting user is shown.
const (
	MetaOperation = "operation"
	MetaWho       = "who"
	MetaState     = "state"
)

// ErrLockedHere is a Lock of a workspace this process has locked already.
var ErrLockedHere = errors.New("the state is already locked by this Terraform process")

// Lock acquires the lock of a workspace's state and seals the state: it
// rewrites the state object (or creates a placeholder) under the new epoch,
// so that no writer of an older epoch can land a write from then on, not
// even one already on its way. It returns the lock ID (LockID). A held
// lock is waited for as configured; a *s3lock.HeldError says who holds it.
// ctx ends the wait (the lock's line is left) and the seal.
func (s *Store) Lock(ctx context.Context, ws, operation string) (string, error) {
	key := s.Key(ws)
	h := &held{} // reserves the workspace while its lock is taken
	s.mu.Lock()
	if prev := s.held[ws]; prev != nil && !prev.abandoned { // an abandoned lock's entry gives way to a new lock
		s.mu.Unlock()
		return "", fmt.Errorf("locking the state s3://%s/%s: %w", s.cfg.Bucket, key, ErrLockedHere)
	}
	s.held[ws] = h
	s.mu.Unlock()
	lease, etag, err := s.acquire(ctx, ws, operation)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.held, ws)
		return "", err
	}
	h.lease, h.etag = lease, etag
	if s.cfg.Gone != nil {
		go s.abandonWhenGone(h)
	}
	return LockID(lease.Epoch()), nil
}

// acquire takes the lease and seals the state under it.
func (s *Store) acquire(ctx context.Context, ws, operation string) (*s3lock.Lease, string, error) {
	opts := []s3lock.AcquireOption{
		s3lock.WithWait(s.cfg.Wait),
		s3lock.WithMetadata(map[string]string{MetaOperation: operation, MetaWho: s.cfg.Who, MetaState: "s3://" + s.cfg.Bucket + "/" + s.Key(ws)}),
	}
	if s.cfg.Order != "" {
		opts = append(opts, s3lock.WithOrder(s.cfg.Order))
	}
	if s.cfg.Lease > 0 {
		opts = append(opts, s3lock.WithLeaseFor(s.cfg.Lease))
	}
	lease, err := s.client.Acquire(ctx, s.LockName(ws), opts...)
	if err != nil {
		return nil, "", err
	}
	etag, err := s.seal(ctx, s.Key(ws), lease.Epoch())
	if err != nil {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, fmt.Errorf("releasing the lease after the failed seal: %w", rerr))
		}
		return nil, "", err
	}
	return lease, etag, nil
}

// seal rewrites the object at key with the mark of epoch (a placeholder if
// it is absent), conditional on what it read, and returns its new ETag.
func (s *Store) seal(ctx context.Context, key string, epoch uint64) (string, error) {
	var last error
	for range sealAttempts {
		body, etag, err := s.get(ctx, key)
		if err != nil {
			return "", err
		}
		in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key),
			Body: stdbytes.NewReader(marked(unmarked(body), epoch)), ContentType: aws.String(stateContentType)}
		if body == nil {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(etag)
		}
		out, err := s.client.FencedPut(ctx, epoch, in)
		if err == nil {
			return aws.ToString(out.ETag), nil
		}
		if !errors.Is(err, s3lock.ErrObjectChanged) {
			return "", fmt.Errorf("sealing the state s3://%s/%s under epoch %d: %w", s.cfg.Bucket, key, epoch, err)
		}
		last = err // written between the read and the seal: read again
	}
	return "", fmt.Errorf("sealing the state s3://%s/%s under epoch %d: it kept changing (%d attempts): %w",
		s.cfg.Bucket, key, epoch, sealAttempts, last)
}

// Unlock releases a lock. An ID of a lease this process does not hold is
// a force-unlock: the lease of that epoch is released if it is still the
// lock's current one (nothing to do if it ended already); the ID of an
// older lease is refused with a *NotCurrentError, so that a force-unlock
// never frees a newer run's lock.
func (s *Store) Unlock(ctx context.Context, ws, id string) error {
	s.mu.Lock()
	h := s.held[ws]
	mine := h != nil && h.lease != nil && LockID(h.lease.Epoch()) == id
	abandoned := mine && h.abandoned
	if mine && !abandoned {
		delete(s.held, ws) // an abandoned entry stays: its late writes are refused
	}
	s.mu.Unlock()
	switch {
	case !mine:
		return s.forceUnlock(ctx, ws, id)
	case abandoned:
		return fmt.Errorf("unlocking the state s3://%s/%s: %w (lock ID %s lapses by itself)", s.cfg.Bucket, s.Key(ws), ErrAbandoned, id)
	}
	return h.lease.Release(ctx)
}

func (s *Store) forceUnlock(ctx context.Context, ws, id string) error {
	epoch, err := ParseLockID(id)
	if err != nil {
		return err
	}
	name := s.LockName(ws)
	cur, err := s.client.Current(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case cur.Epoch != epoch:
		return &NotCurrentError{Bucket: s.cfg.Bucket, Lock: name, ID: id, Current: cur}
	case cur.Phase() != s3lock.PhaseHeld:
		return nil // released or lapsed already: the state is not locked
	}
	return s.client.ForceRelease(ctx, s3lock.Token{Bucket: s.cfg.Bucket, Name: name, Epoch: epoch})
}

// abandonWhenGone leaves a lease to lapse if Terraform goes away while it
// is held: stops renewing it without releasing it (a SIGKILLed Terraform
// wrote what it wrote; nothing will unlock, and the lock lapses after its
// lease), and marks it so that a late write is refused.
func (s *Store) abandonWhenGone(h *held) {
	select {
	case <-h.lease.Done():
	case <-s.cfg.Gone:
		s.mu.Lock()
		h.abandoned = true
		s.mu.Unlock()
		h.lease.Detach()
	}
}

// LockID is the lock ID Terraform shows and force-unlock takes: the epoch.
func LockID(epoch uint64) string { return strconv.FormatUint(epoch, 10) }

// ParseLockID reads a lock ID.
func ParseLockID(id string) (uint64, error) {
	epoch, err := strconv.ParseUint(id, 10, 64)
	if err != nil || epoch == 0 {
		return 0, fmt.Errorf("%q is not the ID of an s3lock state lock (a lease's epoch, a number from 1, as Terraform "+
			"showed it in \"Lock Info\")", id)
	}
	return epoch, nil
}
