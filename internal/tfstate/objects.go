package tfstate

import (
	stdbytes "bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
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
	if h != nil && h.lease != nil && s.held[ws] == h && h.etag == before {
		if e, ok := markEpoch(body); ok && e == h.lease.Epoch() {
			h.etag = etag
		}
	}
	s.mu.Unlock()
	return unmarked(body), nil
}

// Write stores a workspace's state. Under this process's lock it is
// fenced: it lands only if the lease has not ended or run out, the lease is
// the lock's newest, and the object is as this holder last saw it (bytes
// marked with its own epoch); otherwise nothing is written and the error is
// a *StaleWriteError. Without the lock (terraform workspace new and state
// migrate write so in Terraform 1.16, and -lock=false) it writes the state
// unmarked and unconditionally, as the S3 backend does: such bytes are
// never a holder's to write over, so they do not reopen the fence.
func (s *Store) Write(ctx context.Context, ws string, state []byte) error {
	key := s.Key(ws)
	s.mu.Lock()
	h := s.held[ws]
	var lease *s3lock.Lease
	var etag string
	var abandoned bool
	if h != nil {
		lease, etag, abandoned = h.lease, h.etag, h.abandoned
	}
	s.mu.Unlock()
	switch {
	case h == nil:
		return s.putUnlocked(ctx, key, state)
	case lease == nil:
		return fmt.Errorf("writing the state s3://%s/%s: %w", s.cfg.Bucket, key, ErrLocking)
	}
	stale := &StaleWriteError{Bucket: s.cfg.Bucket, Key: key, Lock: s.LockName(ws), Epoch: lease.Epoch()}
	switch {
	case abandoned:
		stale.Err = ErrAbandoned
		return stale
	case lease.Err() != nil:
		stale.Err = lease.Err()
		return stale
	case !s.cfg.Now().Before(lease.ExpiresAt()):
		stale.Err = fmt.Errorf("%w: its renewals did not get through before it ran out at %s", ErrLeaseRanOut,
			lease.ExpiresAt().Format("15:04:05.000"))
		return stale
	}
	in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key),
		Body: stdbytes.NewReader(marked(state, lease.Epoch())), ContentType: aws.String(stateContentType)}
	if etag == "" { // never after a seal, which leaves an object; kept for a store without one
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := s.client.FencedPut(ctx, lease.Epoch(), in)
	if fe := (*s3lock.FenceError)(nil); errors.As(err, &fe) {
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
// *s3lock.HeldError. The lock's own objects stay, so that its epochs go on
// growing if the workspace is made again.
func (s *Store) Delete(ctx context.Context, ws string) error {
	if ws == DefaultWorkspace {
		return fmt.Errorf("%w: the default workspace cannot be deleted", ErrInvalidConfig)
	}
	key := s.Key(ws)
	lease, err := s.client.TryAcquire(ctx, s.LockName(ws), s3lock.WithMetadata(map[string]string{
		MetaOperation: "OperationTypeWorkspaceDelete", MetaWho: s.cfg.Who, MetaState: "s3://" + s.cfg.Bucket + "/" + key}))
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
func (s *Store) get(ctx context.Context, key string) ([]byte, string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ExpectedBucketOwner: s.owner()}
	s.cfg.Objects.OnGet(in)
	out, err := s.api.GetObject(ctx, in)
	if notFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", s.opError("reading the state", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", s.opError("reading the state", key, err)
	}
	if body == nil {
		body = []byte{}
	}
	return body, aws.ToString(out.ETag), nil
}

// putUnlocked writes a state without the lock: unmarked (so that it never
// carries a holder's mark), unconditionally, with the configured encryption.
func (s *Store) putUnlocked(ctx context.Context, key string, state []byte) error {
	in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ExpectedBucketOwner: s.owner(),
		Body: stdbytes.NewReader(unmarked(state)), ContentType: aws.String(stateContentType)}
	s.cfg.Objects.OnPut(in)
	if _, err := s.api.PutObject(ctx, in); err != nil {
		return s.opError("writing the state", key, err)
	}
	return nil
}

func notFound(err error) bool {
	var nsk *types.NoSuchKey
	var ae smithy.APIError
	return errors.As(err, &nsk) || errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchKey")
}
