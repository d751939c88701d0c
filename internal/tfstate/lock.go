package tfstate

import (
	stdbytes "bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
)

// sealAttempts bounds how often Lock re-reads a state that keeps changing
// between its read and its seal.
const sealAttempts = 5

// lostCleanupTimeout bounds the removal of a lost lease's lock file: if
// the store does not answer, the next run through s3lock removes it.
const lostCleanupTimeout = 30 * time.Second

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
// even one already on its way. With Config.LockFile it takes the S3
// backend's lock file between the two. It returns the lock ID (LockID). A
// held lock is waited for as configured; a *s3lock.HeldError (or a
// *LockFileHeldError) says who holds it. ctx ends the wait (the lock's line
// is left) and the seal.
func (s *Store) Lock(ctx context.Context, ws, operation string) (string, error) {
	if err := s.checkWorkspace(ws); err != nil {
		return "", err
	}
	key := s.Key(ws)
	h := &held{} // reserves the workspace while its lock is taken
	s.mu.Lock()
	if prev := s.held[ws]; prev != nil && !prev.abandoned { // an abandoned lock's entry gives way to a new lock
		s.mu.Unlock()
		return "", fmt.Errorf("locking the state s3://%s/%s: %w", s.cfg.Bucket, key, ErrLockedHere)
	}
	s.held[ws] = h
	s.mu.Unlock()
	lease, etag, placeholder, err := s.acquire(ctx, ws, operation)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.held, ws)
		return "", err
	}
	h.lease, h.etag = lease, etag
	if placeholder {
		h.placeholder = etag
	}
	go s.watch(ws, h)
	return LockID(lease.Token().Epoch), nil
}

// acquire takes the lease (and the lock file) and seals the state under it;
// it returns the lease, the seal's ETag and whether the seal is a
// placeholder.
func (s *Store) acquire(ctx context.Context, ws, operation string) (*s3lock.Lease, string, bool, error) {
	deadline := s.cfg.Now().Add(s.cfg.Wait)
	opts := []s3lock.Option{
		s3lock.WithWait(s.cfg.Wait),
		s3lock.WithMetadata(s.lockMetadata(ws, operation)),
	}
	if s.cfg.Order != "" {
		opts = append(opts, s3lock.WithOrder(s.cfg.Order))
	}
	if s.cfg.Lease > 0 {
		opts = append(opts, s3lock.WithLeaseDuration(s.cfg.Lease))
	}
	if s.cfg.MaxHold > 0 {
		opts = append(opts, s3lock.WithMaxHold(s.cfg.MaxHold))
	}
	if s.cfg.WaitObserver != nil {
		opts = append(opts, s3lock.WithWaitObserver(func(h *s3lock.HeldError) { s.cfg.WaitObserver(h) }))
	}
	lease, err := s.client.Acquire(ctx, s.LockName(ws), opts...)
	if err != nil {
		return nil, "", false, err
	}
	undo := func(err error) (*s3lock.Lease, string, bool, error) {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, fmt.Errorf("releasing the lease after the failed lock: %w", rerr))
		}
		return nil, "", false, err
	}
	if s.cfg.LockFile {
		if err := s.takeLockFile(ctx, ws, lease, operation, deadline); err != nil {
			return undo(err)
		}
	}
	etag, placeholder, err := s.seal(ctx, s.Key(ws), lease.Token().Epoch)
	if err != nil {
		if s.cfg.LockFile {
			if ferr := s.releaseLockFile(context.WithoutCancel(ctx), ws, lease.Token().Epoch); ferr != nil {
				err = errors.Join(err, ferr)
			}
		}
		return undo(err)
	}
	return lease, etag, placeholder, nil
}

// seal rewrites the object at key with the mark of epoch (a placeholder if
// it holds no state), conditional on what it read, and returns its new
// ETag and whether it wrote a placeholder.
func (s *Store) seal(ctx context.Context, key string, epoch uint64) (string, bool, error) {
	var last error
	for range sealAttempts {
		body, etag, err := s.get(ctx, key)
		if err != nil {
			return "", false, err
		}
		state := unmarked(body)
		in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key),
			Body: stdbytes.NewReader(marked(state, epoch)), ContentType: aws.String(stateContentType)}
		if body == nil {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(etag)
		}
		out, err := fence.Put(ctx, s.client, epoch, in)
		if err == nil {
			return aws.ToString(out.ETag), state == nil, nil
		}
		if !errors.Is(err, fence.ErrObjectChanged) {
			return "", false, fmt.Errorf("sealing the state s3://%s/%s under epoch %d: %w", s.cfg.Bucket, key, epoch, err)
		}
		last = err // written between the read and the seal: read again
	}
	return "", false, fmt.Errorf("sealing the state s3://%s/%s under epoch %d: it kept changing (%d attempts): %w",
		s.cfg.Bucket, key, epoch, sealAttempts, last)
}

// dropPlaceholder deletes the state object of a lock being unlocked if it
// is still the placeholder the lock's seal wrote: no write under the lock
// sent a PUT (the caller holds h.writes, so none is in flight).
// Terraform's S3 backend cannot read a placeholder as "no state". The
// delete is conditional on the placeholder's ETag, which guards against a
// write without the lock where the store honours it (PROTOCOL.md §15).
func (s *Store) dropPlaceholder(ctx context.Context, ws string, h *held) {
	s.mu.Lock()
	placeholder := h.placeholder != "" && h.placeholder == h.etag
	etag := h.etag
	s.mu.Unlock()
	if !placeholder || h.lease.Err() != nil {
		return
	}
	_, _ = s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.Key(ws)),
		ExpectedBucketOwner: s.owner(), IfMatch: aws.String(etag)})
}

// Unlock releases a lock (and its lock file). An ID of a lease this
// process does not hold is a force-unlock: the lease of that epoch is
// released if it is still the lock's current one (nothing to do if it ended
// already); the ID of an older lease is refused with a *NotCurrentError, so
// that a force-unlock never frees a newer run's lock. With Config.LockFile,
// an ID that is not an epoch is that of a lock file a run without s3lock
// holds, which is removed if it is still that run's.
func (s *Store) Unlock(ctx context.Context, ws, id string) error {
	if err := s.checkWorkspace(ws); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.held[ws]
	mine := h != nil && h.lease != nil && LockID(h.lease.Token().Epoch) == id
	abandoned := mine && h.abandoned
	if mine && !abandoned {
		h.unlocking = true
		delete(s.held, ws) // an abandoned entry stays: its late writes are refused
	}
	s.mu.Unlock()
	switch {
	case !mine:
		return s.forceUnlock(ctx, ws, id)
	case abandoned:
		return fmt.Errorf("unlocking the state s3://%s/%s: %w (lock ID %s lapses by itself)", s.cfg.Bucket, s.Key(ws), ErrAbandoned, id)
	}
	h.writes.Lock() // the writes in flight finish first; later ones find it unlocking
	defer h.writes.Unlock()
	s.dropPlaceholder(ctx, ws, h)
	var ferr error
	if s.cfg.LockFile { // only this lease's: after a force-unlock another run's may be there
		ferr = s.releaseLockFile(ctx, ws, h.lease.Token().Epoch)
	}
	return errors.Join(h.lease.Release(ctx), ferr)
}

func (s *Store) forceUnlock(ctx context.Context, ws, id string) error {
	epoch, err := ParseLockID(id)
	if err != nil {
		if s.cfg.LockFile {
			return s.forceUnlockFile(ctx, ws, id, err)
		}
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
		// Released or lapsed already: only its lock file may be left.
		if s.cfg.LockFile {
			return s.releaseLockFile(ctx, ws, epoch)
		}
		return nil
	}
	if err := s.client.ForceRelease(ctx, s3lock.Token{Bucket: s.cfg.Bucket, Name: name, Epoch: epoch}); err != nil {
		return err
	}
	if s.cfg.LockFile {
		return s.releaseLockFile(ctx, ws, epoch)
	}
	return nil
}

// forceUnlockFile removes the lock file of a run without s3lock whose lock
// ID is id, as the S3 backend's force-unlock does; notEpoch is why id is
// not an s3lock lock ID.
func (s *Store) forceUnlockFile(ctx context.Context, ws, id string, notEpoch error) error {
	key := s.LockFileKey(ws)
	found, etag, err := s.readLockFile(ctx, key)
	switch {
	case err != nil:
		return err
	case etag == "" || found.ID != id:
		return fmt.Errorf("%w, nor that of the S3 backend's lock file s3://%s/%s (%s), so nothing was unlocked",
			notEpoch, s.cfg.Bucket, key, lockFileText(found, etag != ""))
	}
	return s.deleteLockFile(ctx, key, etag)
}

// lockFileText says what a lock file holds, for an error.
func lockFileText(li LockInfo, exists bool) string {
	if !exists {
		return "there is none"
	}
	return "held by " + li.Holder()
}

// watch follows a lock this store holds until it ends: once Terraform is
// gone (Config.Gone) it leaves the lease to lapse (stops renewing it without
// releasing it: a SIGKILLed Terraform wrote what it wrote; nothing will
// unlock, and the lock lapses after its lease) and marks it so that a late
// write is refused; a lease that ends other than by Unlock is reported
// (Config.OnLost).
func (s *Store) watch(ws string, h *held) {
	select {
	case <-h.lease.Done():
		s.mu.Lock()
		lost := !h.unlocking
		s.mu.Unlock()
		if !lost {
			return
		}
		if s.cfg.OnLost != nil { // first: the cleanup may wait on the store that lost the lease
			s.cfg.OnLost(ws, h.lease.Err())
		}
		if s.cfg.LockFile { // this epoch's only: a newer run's lock file stays
			ctx, cancel := context.WithTimeout(context.Background(), lostCleanupTimeout)
			_ = s.releaseLockFile(ctx, ws, h.lease.Token().Epoch)
			cancel()
		}
	case <-s.cfg.Gone: // nil: never
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
			"showed it: in its Lock Info with the state store, as \"already locked: ID=N\" with the http backend)", id)
	}
	return epoch, nil
}

// lockMetadata is the metadata of a state's lease: what Terraform said the
// operation is and who runs it, made fit to print (s3lock holds metadata to
// a holder's rule, and a Who from a request is any text), and the state.
func (s *Store) lockMetadata(ws, operation string) map[string]string {
	return map[string]string{MetaOperation: Printable(operation), MetaWho: Printable(s.cfg.Who), MetaState: "s3://" + s.cfg.Bucket + "/" + s.Key(ws)}
}
