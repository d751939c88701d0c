package tfstate

import (
	stdbytes "bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// Lock acquires the lock of a workspace's state for operation (Terraform's
// lock info Operation). A plan (SharedOperation) takes a shared lock: any
// number of plans hold it together, and it writes nothing — no seal, no
// placeholder, no lock file — and refuses every write of the state
// (ErrSharedLock). Any other operation takes the exclusive lock and seals the
// state: it rewrites the state object (or creates a placeholder) under the
// new epoch, so that no writer of an older epoch can land a write from then
// on, not even one already on its way; it waits for the plans that hold the
// lock, and no new plan joins meanwhile. With Config.LockFile an exclusive
// lock takes the S3 backend's lock file between the two. It returns the lock
// ID (LockID; a shared lock's names its share). A held lock is waited for as
// configured; a *s3lock.HeldError (or a *LockFileHeldError) says who holds
// it. ctx ends the wait (the lock's line is left) and the seal.
func (s *Store) Lock(ctx context.Context, ws, operation string) (string, error) {
	if err := s.checkWorkspace(ws); err != nil {
		return "", err
	}
	key := s.Key(ws)
	h := &held{shared: SharedOperation(operation)} // reserves the workspace while its lock is taken
	s.mu.Lock()
	if prev := s.held[ws]; prev != nil && !prev.abandoned { // an abandoned lock's entry gives way to a new lock
		s.mu.Unlock()
		return "", fmt.Errorf("locking the state s3://%s/%s: %w", s.cfg.Bucket, key, ErrLockedHere)
	}
	s.held[ws] = h
	s.mu.Unlock()
	lease, etag, placeholder, err := s.acquire(ctx, ws, operation, h.shared)
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
	return leaseLockID(lease.Token()), nil
}

// acquire takes the lease (and the lock file) and seals the state under it;
// it returns the lease, the seal's ETag and whether the seal is a
// placeholder. A shared lease is only taken: it writes nothing.
func (s *Store) acquire(ctx context.Context, ws, operation string, shared bool) (*s3lock.Lease, string, bool, error) {
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
	if shared {
		opts = append(opts, s3lock.WithShared())
	}
	lease, err := s.client.Acquire(ctx, s.LockName(ws), opts...)
	if err != nil || shared {
		return lease, "", false, err
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
// that a force-unlock never frees a newer run's lock. The ID of a share
// (a plan's shared lock, "EPOCH.SHARE") ends that share only; the plain
// epoch of a shared lock is refused with a *SharedEpochError, which lists
// its shares' IDs. With Config.LockFile,
// an ID that is not an epoch is that of a lock file a run without s3lock
// holds, which is removed if it is still that run's.
func (s *Store) Unlock(ctx context.Context, ws, id string) error {
	if err := s.checkWorkspace(ws); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.held[ws]
	mine := h != nil && h.lease != nil && leaseLockID(h.lease.Token()) == id
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
	if s.cfg.LockFile && !h.shared { // only this lease's: after a force-unlock another run's may be there
		ferr = s.releaseLockFile(ctx, ws, h.lease.Token().Epoch)
	}
	return errors.Join(h.lease.Release(ctx), ferr)
}

func (s *Store) forceUnlock(ctx context.Context, ws, id string) error {
	epoch, share, err := ParseLockID(id)
	if err != nil {
		if s.cfg.LockFile {
			return s.forceUnlockFile(ctx, ws, id, err)
		}
		return err
	}
	name := s.LockName(ws)
	if share != "" {
		return s.forceUnlockShare(ctx, id, s3lock.Token{Bucket: s.cfg.Bucket, Name: name, Epoch: epoch, Share: share})
	}
	cur, err := s.client.Current(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case cur.Epoch != epoch:
		return &NotCurrentError{Bucket: s.cfg.Bucket, Lock: name, ID: id, Current: cur}
	case cur.Shared:
		return &SharedEpochError{Bucket: s.cfg.Bucket, Lock: name, ID: id, Current: cur}
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

// forceUnlockShare force-releases the share t (a plan's shared lock whose
// lock ID is id): only that plan's lock ends. A share that is gone already is
// refused with a *NotCurrentError saying how the lock stands.
func (s *Store) forceUnlockShare(ctx context.Context, id string, t s3lock.Token) error {
	err := s.client.ForceRelease(ctx, t)
	if !errors.Is(err, s3lock.ErrNoSuchEpoch) {
		return err
	}
	cur, cerr := s.client.Current(ctx, t.Name)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	return &NotCurrentError{Bucket: s.cfg.Bucket, Lock: t.Name, ID: id, Current: cur}
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
		if s.cfg.LockFile && !h.shared { // this epoch's only: a newer run's lock file stays
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

// OperationPlan is the Operation of Terraform's lock info for a plan
// (terraform plan, with or without -out, and terraform query): the name of
// its backendrun.OperationTypePlan, the same in OpenTofu.
const OperationPlan = "OperationTypePlan"

// SharedOperation reports whether a lock for operation is shared: a plan,
// which never writes the state (a saved plan whose state changed since is
// refused by Terraform at apply). Every other operation — apply, refresh,
// import, state mv/rm/push, workspace operations, an unknown or empty one —
// takes the exclusive lock.
func SharedOperation(operation string) bool { return operation == OperationPlan }

// LockID is the lock ID Terraform shows and force-unlock takes for an
// exclusive lock: the epoch.
func LockID(epoch uint64) string { return strconv.FormatUint(epoch, 10) }

// shareSeparator joins a shared lock's epoch and share id in its lock ID.
const shareSeparator = "."

// ShareLockID is the lock ID of a shared lock (a plan's): its shared epoch
// and its share id, "EPOCH.SHARE", distinct for each plan.
func ShareLockID(epoch uint64, share string) string { return LockID(epoch) + shareSeparator + share }

// leaseLockID is the lock ID of a lease of a state's lock.
func leaseLockID(t s3lock.Token) string {
	if t.Share != "" {
		return ShareLockID(t.Epoch, t.Share)
	}
	return LockID(t.Epoch)
}

// HeldLockID is the lock ID of the holder a *s3lock.HeldError names: the
// share's, for a lock held shared.
func HeldLockID(held *s3lock.HeldError) string {
	if held.Share != "" {
		return ShareLockID(held.Epoch, held.Share)
	}
	return LockID(held.Epoch)
}

// ParseLockID reads a lock ID: an exclusive lock's epoch, or a shared
// lock's "EPOCH.SHARE" (share is then its share id; the s3lock client
// checks it).
func ParseLockID(id string) (epoch uint64, share string, err error) {
	digits, share, shared := strings.Cut(id, shareSeparator)
	epoch, err = strconv.ParseUint(digits, 10, 64)
	if err != nil || epoch == 0 || shared && share == "" {
		return 0, "", fmt.Errorf("%q is not the ID of an s3lock state lock (a lease's epoch, a number from 1, or a plan's "+
			"shared lock, EPOCH.SHARE, as Terraform showed it: in its Lock Info with the state store, as \"already locked: "+
			"ID=...\" with the http backend)", id)
	}
	return epoch, share, nil
}

// lockMetadata is the metadata of a state's lease: what Terraform said the
// operation is and who runs it, made fit to print (s3lock holds metadata to
// a holder's rule, and a Who from a request is any text), and the state.
func (s *Store) lockMetadata(ws, operation string) map[string]string {
	return map[string]string{MetaOperation: Printable(operation), MetaWho: Printable(s.cfg.Who), MetaState: "s3://" + s.cfg.Bucket + "/" + s.Key(ws)}
}
