package tfstate

import (
	stdbytes "bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The S3 backend's lock file (Config.LockFile, PROTOCOL.md §15): Terraform's
// S3 backend with use_lockfile locks the state at KEY by creating KEY.tflock
// with If-None-Match and its lock info, and deletes it to unlock. A store
// that holds it too makes such runs wait while one of its own runs holds the
// state, and waits while one of theirs does.

// LockFileSuffix is appended to a state's key to name the S3 backend's lock
// file.
const LockFileSuffix = ".tflock"

// lockFilePoll is how often a lock that waits for a lock file a run
// without s3lock holds reads it again: Terraform's own lock retries start
// at one second too.
const lockFilePoll = time.Second

// lockFileAttempts bounds how often a create of the lock file is retried
// when the store refuses it (412) but the lock file it then reads is gone:
// on a sound store a race that rarely repeats; on a store that answers so
// every time, an error rather than an endless loop.
const lockFileAttempts = 10

// lockFileInfoPrefix begins the Info of a lock file the store wrote; the
// epoch of its lease follows. With the lock ID (the same epoch) it tells
// the store's lock files from those of runs without s3lock, whose lock IDs
// are UUIDs.
const lockFileInfoPrefix = "s3lock epoch "

// LockFileHeldError is a lock that found the S3 backend's lock file of the
// state held by a run without s3lock (Terraform's S3 backend, use_lockfile)
// and did not get it before its wait ended.
type LockFileHeldError struct {
	Bucket, Key string // the lock file's
	Info        LockInfo
}

func (e *LockFileHeldError) Error() string {
	return fmt.Sprintf("the S3 backend's lock file s3://%s/%s is held by a run without s3lock: %s", e.Bucket, e.Key, e.Info.Holder())
}

// Holder says who holds a lock, from its lock info: who, the lock ID, the
// operation and since when.
func (li LockInfo) Holder() string {
	who := li.Who
	if who == "" {
		who = "an unknown holder"
	}
	text := fmt.Sprintf("%s, lock ID %q", who, li.ID)
	if li.Operation != "" {
		text += ", " + li.Operation
	}
	if !li.Created.IsZero() {
		text += ", since " + li.Created.UTC().Format(time.RFC3339)
	}
	return text
}

// LockFileKey is the key of the S3 backend's lock file of a workspace's
// state.
func (s *Store) LockFileKey(ws string) string { return s.Key(ws) + LockFileSuffix }

// ourLockFile is the lock file of the lease of epoch on a workspace.
func (s *Store) ourLockFile(ws string, epoch uint64, operation string) LockInfo {
	return LockInfo{ID: LockID(epoch), Operation: operation, Who: s.cfg.Who, Version: "s3lock",
		Created: s.cfg.Now().UTC(), Path: s.cfg.Bucket + "/" + s.Key(ws),
		Info: fmt.Sprintf("%s%d: held through s3lock by %s (lock s3://%s/%s) while its run lives; if that run died, the "+
			"next run through s3lock that locks the state removes this file; to free the state now: s3lock backend run --key %s -- "+
			"terraform force-unlock %d", lockFileInfoPrefix, epoch, Printable(s.client.Holder()), s.cfg.Bucket, s.LockName(ws), s.Key(ws), epoch)}
}

// lockFileEpoch returns the epoch of a lock file the store wrote, and false
// for one a run without s3lock wrote.
func lockFileEpoch(li LockInfo) (uint64, bool) {
	rest, ok := strings.CutPrefix(li.Info, lockFileInfoPrefix)
	if !ok {
		return 0, false
	}
	n, _, _ := strings.Cut(rest, ":")
	epoch, err := strconv.ParseUint(n, 10, 64)
	if err != nil || epoch == 0 || li.ID != n {
		return 0, false
	}
	return epoch, true
}

// takeLockFile creates the lock file of the lease of epoch, waiting until
// deadline while a run without s3lock holds it. A lock file the store
// wrote under an older epoch is its run's, which is over (this lease is
// the lock's newest): it is removed. The lease must stay held throughout.
func (s *Store) takeLockFile(ctx context.Context, ws string, lease *s3lock.Lease, operation string, deadline time.Time) error {
	key := s.LockFileKey(ws)
	mine := s.ourLockFile(ws, lease.Token().Epoch, operation)
	for again := 0; ; again++ {
		if again == lockFileAttempts {
			return fmt.Errorf("creating the S3 backend's lock file s3://%s/%s: the store refused the create %d times "+
				"while the lock file it found kept going away", s.cfg.Bucket, key, again)
		}
		err := s.createLockFile(ctx, key, mine)
		if err == nil {
			return nil
		}
		if !preconditionFailed(err) {
			return s.opError("creating the S3 backend's lock file", key, err)
		}
		found, etag, err := s.readLockFile(ctx, key)
		switch {
		case err != nil:
			return err
		case etag == "": // deleted since: create it again
			continue
		}
		epoch, ours := lockFileEpoch(found)
		switch {
		case ours && epoch == lease.Token().Epoch:
			return nil
		case ours && epoch < lease.Token().Epoch:
			// Left by a run whose lease ended (it died): this lease is newer.
			if err := s.deleteLockFile(ctx, key, etag); err != nil {
				return err
			}
			continue
		case ours:
			return fmt.Errorf("the S3 backend's lock file s3://%s/%s names epoch %d, newer than this lease's %d: "+
				"this lease is no longer the lock's", s.cfg.Bucket, key, epoch, lease.Token().Epoch)
		}
		again = 0 // found held: a wait, not a retry
		held := &LockFileHeldError{Bucket: s.cfg.Bucket, Key: key, Info: found}
		if !s.cfg.Now().Before(deadline) {
			return held
		}
		if s.cfg.WaitObserver != nil {
			s.cfg.WaitObserver(held)
		}
		if err := s.pause(ctx, lease, lockFilePoll); err != nil {
			return err
		}
	}
}

// pause waits d, unless ctx ends or the lease does first.
func (s *Store) pause(ctx context.Context, lease *s3lock.Lease, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-lease.Done():
		return lease.Err()
	}
}

// RemoveLockFile removes the lock file a lock of lockID left (its lease was
// lost while the store was unreachable, and the removal then failed), if it
// still names that lock's epoch; nothing without Config.LockFile, nor for
// a shared lock, which takes none.
func (s *Store) RemoveLockFile(ctx context.Context, ws, lockID string) error {
	epoch, share, err := ParseLockID(lockID)
	if err != nil || !s.cfg.LockFile || share != "" {
		return err
	}
	return s.releaseLockFile(ctx, ws, epoch)
}

// releaseLockFile removes the lock file of the lease of epoch, if it is
// still that lease's (someone may have force-unlocked it, and another run
// taken it since).
func (s *Store) releaseLockFile(ctx context.Context, ws string, epoch uint64) error {
	key := s.LockFileKey(ws)
	found, etag, err := s.readLockFile(ctx, key)
	if err != nil || etag == "" {
		return err
	}
	if e, ours := lockFileEpoch(found); !ours || e != epoch {
		return nil
	}
	return s.deleteLockFile(ctx, key, etag)
}

func (s *Store) createLockFile(ctx context.Context, key string, li LockInfo) error {
	in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ExpectedBucketOwner: s.owner(),
		Body: stdbytes.NewReader(li.JSON()), ContentType: aws.String(stateContentType), IfNoneMatch: aws.String("*")}
	s.cfg.Objects.OnPut(in)
	_, err := s.api.PutObject(ctx, in)
	return err
}

// readLockFile reads a lock file: its lock info and ETag, or "" as the ETag
// if there is none. A lock file that is not lock info (written by hand) is
// shown as what it is: held by nobody known.
func (s *Store) readLockFile(ctx context.Context, key string) (LockInfo, string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ExpectedBucketOwner: s.owner()}
	s.cfg.Objects.OnGet(in)
	out, err := s.api.GetObject(ctx, in)
	if notFound(err) {
		return LockInfo{}, "", nil
	}
	if err != nil {
		return LockInfo{}, "", s.opError("reading the S3 backend's lock file", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, MaxLockInfo+1))
	if err != nil {
		return LockInfo{}, "", s.opError("reading the S3 backend's lock file", key, err)
	}
	li, perr := ParseLockInfo(body)
	if perr != nil {
		li = LockInfo{Info: fmt.Sprintf("the lock file is not Terraform's lock info (%v)", perr)}
	}
	return li, aws.ToString(out.ETag), nil
}

// deleteLockFile removes a lock file read just before, with that read's
// ETag (If-Match): a lock file is only ever created (If-None-Match), never
// rewritten, so another file at the key (someone deleted the one read, and
// another run created its own) has another ETag and is kept, where the
// store honours the condition (AWS, versitygw; MinIO ignores it: the
// window stays there, PROTOCOL.md §15).
func (s *Store) deleteLockFile(ctx context.Context, key, etag string) error {
	_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key),
		ExpectedBucketOwner: s.owner(), IfMatch: aws.String(etag)})
	if err != nil && !notFound(err) && !preconditionFailed(err) {
		return s.opError("deleting the S3 backend's lock file", key, err)
	}
	return nil
}

// preconditionFailed reports a conditional write refused because its
// condition did not hold (412), or because another conditional write of
// the key was in flight (409 ConditionalRequestConflict).
func preconditionFailed(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict") {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && (re.HTTPStatusCode() == http.StatusPreconditionFailed || re.HTTPStatusCode() == http.StatusConflict)
}
