package tfstate

import (
	stdbytes "bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
)

// stateContentType is the Content-Type of state objects, as the S3
// backend writes them.
const stateContentType = "application/json"

// ErrLocking is a write while this process is still taking the
// workspace's lock: neither locked nor unlocked, so refused.
var ErrLocking = errors.New("this process is taking the state's lock; a write must wait for it")

// Read returns a workspace's state without its fence mark; nil when it has
// none (no object, or a lock's placeholder). Under this process's lock,
// reading the holder's own bytes (marked with its epoch) confirms what its
// next write must find; other bytes (written since by someone else) are not
// adopted, so that the next write fails rather than overwrite them.
func (s *Store) Read(ctx context.Context, ws string) ([]byte, error) {
	if err := s.checkWorkspace(ws); err != nil {
		return nil, err
	}
	s.mu.Lock()
	h := s.held[ws]
	var before string
	if h != nil {
		before = h.etag
	}
	s.mu.Unlock()
	body, etag, err := s.get(ctx, s.Key(ws))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	// Only the holder's own bytes, and only if no write of its own moved
	// on meanwhile.
	if h != nil && h.lease != nil && !h.shared && s.held[ws] == h && h.etag == before {
		if e, ok := markEpoch(body); ok && e == h.lease.Token().Epoch {
			h.etag = etag
		}
	}
	s.mu.Unlock()
	return unmarked(body), nil
}

// Write stores a workspace's state. Under this process's shared lock (a
// plan's) it is refused before any request (ErrSharedLock). Under its
// exclusive lock it is fenced: it lands only if the lease has not ended or run out, the lease is
// the lock's newest, and the object is as this holder last saw it (bytes
// marked with its own epoch); otherwise nothing is written and the error is
// a *StaleWriteError. Without the lock (terraform workspace new and state
// migrate write so in Terraform 1.16, and -lock=false) it writes the state
// unmarked and unconditionally, as the S3 backend does: such bytes are
// never a holder's to write over, so they do not reopen the fence.
func (s *Store) Write(ctx context.Context, ws string, state []byte) error {
	if err := s.checkWorkspace(ws); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.held[ws]
	s.mu.Unlock()
	if h == nil {
		return s.putUnlocked(ctx, s.Key(ws), state)
	}
	return s.writeHeld(ctx, ws, h, state)
}

// ErrNotHeld is a write under a lock ID that this store does not hold (any
// more): it was unlocked, or never taken here.
var ErrNotHeld = errors.New("this process holds no lock of that ID (it was unlocked, or never taken here)")

// WriteUnder stores a workspace's state under the lock of lockID, fenced as
// Write does under a lock (refused under a shared lock: ErrSharedLock). It never writes without the lock: if this store
// does not hold lockID (it was unlocked, by its holder or a force-unlock
// through this store), nothing is written and the error is a
// *StaleWriteError matching ErrNotHeld.
func (s *Store) WriteUnder(ctx context.Context, ws, lockID string, state []byte) error {
	if err := s.checkWorkspace(ws); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.held[ws]
	s.mu.Unlock()
	if h == nil || h.lease == nil || leaseLockID(h.lease.Token()) != lockID {
		epoch, _, _ := ParseLockID(lockID)
		return &StaleWriteError{Bucket: s.cfg.Bucket, Key: s.Key(ws), Lock: s.LockName(ws), Epoch: epoch, Err: ErrNotHeld}
	}
	return s.writeHeld(ctx, ws, h, state)
}

// writeHeld is a write under the lock h.
func (s *Store) writeHeld(ctx context.Context, ws string, h *held, state []byte) error {
	key := s.Key(ws)
	if h.shared {
		return s.sharedRefusal("written", ws)
	}
	h.writes.RLock()
	defer h.writes.RUnlock()
	s.mu.Lock()
	lease, etag, abandoned, unlocking := h.lease, h.etag, h.abandoned, h.unlocking
	s.mu.Unlock()
	if lease == nil {
		return fmt.Errorf("writing the state s3://%s/%s: %w", s.cfg.Bucket, key, ErrLocking)
	}
	if err := s.checkSize(key, state); err != nil {
		return err
	}
	stale := &StaleWriteError{Bucket: s.cfg.Bucket, Key: key, Lock: s.LockName(ws), Epoch: lease.Token().Epoch}
	switch {
	case unlocking:
		stale.Err = ErrNotHeld
		return stale
	case abandoned:
		stale.Err = ErrAbandoned
		return stale
	case lease.Err() != nil:
		stale.Err = lease.Err()
		return stale
	case !s.cfg.Now().Before(lease.State().ExpiresAt):
		stale.Err = fmt.Errorf("%w: its renewals did not get through before it ran out at %s", ErrLeaseRanOut,
			lease.State().ExpiresAt.Format("15:04:05.000"))
		return stale
	}
	in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key),
		Body: stdbytes.NewReader(marked(state, lease.Token().Epoch)), ContentType: aws.String(stateContentType)}
	if etag == "" { // never after a seal, which leaves an object; kept for a store without one
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	s.mu.Lock()
	h.placeholder = "" // from here the object may hold a state, seen or not
	s.mu.Unlock()
	out, err := fence.Put(ctx, s.client, lease.Token().Epoch, in)
	if fe := (*fence.Error)(nil); errors.As(err, &fe) {
		stale.Err, stale.Fence = err, fe
		return stale
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.held[ws] == h {
		h.etag = aws.ToString(out.ETag)
	}
	s.mu.Unlock()
	return nil
}

// Delete removes a workspace's state object under its lock, taken at once
// (Terraform 1.16 unlocks a workspace before it deletes it): a workspace
// another run holds is not deleted, and the error is its
// *s3lock.HeldError; one this process holds shared (a plan) is refused
// before any request (ErrSharedLock). The lock's own objects stay, so that its epochs go on
// growing if the workspace is made again.
func (s *Store) Delete(ctx context.Context, ws string) error {
	if ws == DefaultWorkspace {
		return fmt.Errorf("%w: the default workspace cannot be deleted", ErrInvalidConfig)
	}
	if err := s.checkWorkspace(ws); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.held[ws]
	s.mu.Unlock()
	if h != nil && h.shared {
		return s.sharedRefusal("deleted", ws)
	}
	key := s.Key(ws)
	lease, err := s.client.TryAcquire(ctx, s.LockName(ws), s3lock.WithMetadata(s.lockMetadata(ws, "OperationTypeWorkspaceDelete")))
	if err != nil {
		return err
	}
	_, err = s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ExpectedBucketOwner: s.owner()})
	if rerr := lease.Release(context.WithoutCancel(ctx)); err == nil && rerr != nil {
		return fmt.Errorf("deleted s3://%s/%s, but releasing its lock: %w", s.cfg.Bucket, key, rerr)
	}
	if err != nil {
		return s.opError("deleting the state", key, err)
	}
	return nil
}

// get reads an object: its body and ETag, or nil and "" if it is absent.
// It is bounded in size (a state of more than the store's maximum, by the
// object's Content-Length or by what was read, is refused before or
// instead of being read into memory: ErrStateTooLarge) and in time (a
// *GetTimeoutError once the request timeout passes without an answer, or
// its size's transferTimeout without the whole body).
func (s *Store) get(ctx context.Context, key string) ([]byte, string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ExpectedBucketOwner: s.owner()}
	s.cfg.Objects.OnGet(in)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := newGetDeadline(s.timeout(0), cancel)
	defer deadline.stop()
	out, err := s.api.GetObject(ctx, in)
	if notFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", s.opError("reading the state", key, deadline.cause(ctx, err))
	}
	defer out.Body.Close()
	limit := s.maxState + markRoom
	size := aws.ToInt64(out.ContentLength)
	if out.ContentLength == nil {
		size = -1
	}
	if size > limit {
		return nil, "", s.tooLarge("reading", key, sizeText(size), s.maxState)
	}
	deadline.extend(size, s.timeout(max(size, 0)))
	body, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, "", s.opError("reading the state", key, deadline.cause(ctx, err))
	}
	if int64(len(body)) > limit {
		return nil, "", s.tooLarge("reading", key, "more than "+sizeText(limit), s.maxState)
	}
	if body == nil {
		body = []byte{}
	}
	return body, aws.ToString(out.ETag), nil
}

// getDeadline ends a state GET with a *GetTimeoutError when its time is up:
// a timer rather than a context deadline, so that the time can grow once
// the answer says the state's size.
type getDeadline struct {
	timer *time.Timer
	mu    sync.Mutex
	err   *GetTimeoutError // what the timer ends the GET with
}

func newGetDeadline(after time.Duration, cancel context.CancelCauseFunc) *getDeadline {
	d := &getDeadline{err: &GetTimeoutError{After: after, Size: -1}}
	d.timer = time.AfterFunc(after, func() {
		d.mu.Lock()
		err := d.err
		d.mu.Unlock()
		cancel(err)
	})
	return d
}

// extend gives the GET after from now to read a body of size bytes (-1:
// not known), unless its time is up already.
func (d *getDeadline) extend(size int64, after time.Duration) {
	if !d.timer.Stop() {
		return // it fired: the GET ends with the error it had
	}
	d.mu.Lock()
	d.err = &GetTimeoutError{After: after, Size: size}
	d.mu.Unlock()
	d.timer.Reset(after)
}

func (d *getDeadline) stop() { d.timer.Stop() }

// cause is err, or the *GetTimeoutError that ended ctx.
func (d *getDeadline) cause(ctx context.Context, err error) error {
	var te *GetTimeoutError
	if errors.As(context.Cause(ctx), &te) {
		return te
	}
	return err
}

// putUnlocked writes a state without the lock: unmarked (so that it never
// carries a holder's mark), unconditionally, with the configured encryption.
func (s *Store) putUnlocked(ctx context.Context, key string, state []byte) error {
	if err := s.checkSize(key, state); err != nil {
		return err
	}
	in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ExpectedBucketOwner: s.owner(),
		Body: stdbytes.NewReader(unmarked(state)), ContentType: aws.String(stateContentType)}
	s.cfg.Objects.OnPut(in)
	// Timed as every other state transfer (it had no timeout at all).
	ctx, cancel := context.WithTimeout(ctx, s.timeout(int64(len(state))))
	defer cancel()
	if _, err := s.api.PutObject(ctx, in); err != nil {
		return s.opError("writing the state", key, err)
	}
	return nil
}

// checkSize refuses to write a state the store would refuse to read.
func (s *Store) checkSize(key string, state []byte) error {
	if n := int64(len(state)); n > s.maxState {
		return s.tooLarge("writing", key, sizeText(n), s.maxState)
	}
	return nil
}

func notFound(err error) bool {
	var nsk *types.NoSuchKey
	var ae smithy.APIError
	return errors.As(err, &nsk) || errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchKey")
}

// LockedError is a write without the lock (Terraform's -lock=false)
// refused because the state's lock is held.
type LockedError struct {
	Bucket, Key string
	Holder      LockInfo
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("the state s3://%s/%s was not written: it is locked (%s), and a write without the lock "+
		"(-lock=false) would overwrite what that run writes; wait for it, or force-unlock it if its run is gone",
		e.Bucket, e.Key, e.Holder.Holder())
}

// WriteUnlocked writes a workspace's state without its lock, as Write does
// when this process does not hold it (unmarked, unconditionally), unless
// the lock is held by anyone: its lease, or with Config.LockFile the S3
// backend's lock file of a run without s3lock. Then nothing is written and
// the error is a *LockedError. (The check and the write are two requests: a
// lock taken between them is not seen; a write without the lock is only
// ever as safe as its timing.)
func (s *Store) WriteUnlocked(ctx context.Context, ws string, state []byte) error {
	if err := s.checkWorkspace(ws); err != nil {
		return err
	}
	if err := s.checkUnlocked(ctx, ws); err != nil {
		return err
	}
	return s.putUnlocked(ctx, s.Key(ws), state)
}

// checkUnlocked returns a *LockedError if the state's lock is held.
func (s *Store) checkUnlocked(ctx context.Context, ws string) error {
	cur, err := s.client.Current(ctx, s.LockName(ws))
	if err != nil {
		return err
	}
	if cur.Phase() == s3lock.PhaseHeld {
		return &LockedError{Bucket: s.cfg.Bucket, Key: s.Key(ws), Holder: HolderInfo(heldOf(s.cfg.Bucket, cur, s.cfg.Now()), s.Key(ws))}
	}
	if !s.cfg.LockFile {
		return nil
	}
	found, etag, err := s.readLockFile(ctx, s.LockFileKey(ws))
	if err != nil || etag == "" {
		return err
	}
	if _, ours := lockFileEpoch(found); ours {
		return nil // its lease is not held (above): left by a run that died
	}
	return &LockedError{Bucket: s.cfg.Bucket, Key: s.Key(ws), Holder: found}
}
