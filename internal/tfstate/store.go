// Package tfstate is the protocol of the provider's state store: Terraform
// states kept under the keys Terraform's S3 backend uses, locked by s3lock
// leases, and written only by the lease that is the lock's newest (fenced
// writes, PROTOCOL.md §15). It knows Terraform's state layout and nothing of
// the plugin framework; the provider's state store only translates.
package tfstate

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// DefaultWorkspace is the workspace Terraform selects unless told otherwise;
// its state is at the configured key itself.
const DefaultWorkspace = "default"

// DefaultWorkspaceKeyPrefix is where the S3 backend keeps the states of
// the other workspaces: PREFIX/WORKSPACE/KEY.
const DefaultWorkspaceKeyPrefix = "env:"

// LockSuffix is appended to a state's key to name its lock: the lock of
// s3://bucket/path/terraform.tfstate is the s3lock lock
// "path/terraform.tfstate.s3lock" (its objects are under that prefix), as
// the S3 backend's lock file is "path/terraform.tfstate.tflock".
const LockSuffix = ".s3lock"

// sealAttempts bounds how often Lock re-reads a state that keeps changing
// between its read and its seal (writes of runs that do not lock).
const sealAttempts = 5

// Config is where the states are and how their locks are taken.
type Config struct {
	Bucket string
	// Key is the default workspace's state; the others' are at
	// WorkspaceKeyPrefix/WORKSPACE/Key.
	Key                string
	WorkspaceKeyPrefix string // "" is DefaultWorkspaceKeyPrefix
	// Lease is the lease of a lock ("0": the client's default); it renews
	// while the store's process runs and lapses if it dies.
	Lease time.Duration
	// Wait is how long Lock waits for a held lock (0: it fails at once),
	// in Order.
	Wait  time.Duration
	Order s3lock.Order
	// Objects are the encryption and ACL of state objects (the s3lock
	// client applies them to fenced writes; Store to its reads and its
	// unlocked writes).
	Objects awsclient.ObjectSettings
	// Who says who locks ("user@host"), shown to those who wait.
	Who string
	// Gone, when it closes, says that the Terraform process this store
	// serves is gone: the leases it holds are then left to lapse
	// (Abandon). nil: never.
	Gone <-chan struct{}
}

// Store keeps the states of one configuration.
type Store struct {
	api    s3lock.S3API
	client *s3lock.Client
	cfg    Config
	ssec   []byte // the SSE-C key, decoded; nil: none

	mu   sync.Mutex
	held map[string]*held // by workspace
}

// held is a lock this process holds: its lease, and the state object as
// the holder last saw it (its ETag; "" when absent), which its next write
// must find.
type held struct {
	lease *s3lock.Lease
	etag  string
}

// New checks the configuration. client must lock in cfg.Bucket.
func New(api s3lock.S3API, client *s3lock.Client, cfg Config) (*Store, error) {
	if cfg.WorkspaceKeyPrefix == "" {
		cfg.WorkspaceKeyPrefix = DefaultWorkspaceKeyPrefix
	}
	if err := ValidateKey(cfg.Key); err != nil {
		return nil, err
	}
	if err := ValidateWorkspaceKeyPrefix(cfg.WorkspaceKeyPrefix); err != nil {
		return nil, err
	}
	if _, err := cfg.Objects.Options(); err != nil {
		return nil, err
	}
	s := &Store{api: api, client: client, cfg: cfg, held: map[string]*held{}}
	if cfg.Objects.SSECustomerKey != "" {
		s.ssec, _ = base64.StdEncoding.DecodeString(cfg.Objects.SSECustomerKey) // checked by Options
	}
	return s, nil
}

// ValidateKey checks a state key as the S3 backend does: not empty, no
// leading or trailing slash, no empty segment; and short enough to name its
// lock.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the state key is empty: give the object key of the state, e.g. \"path/terraform.tfstate\"", ErrInvalidConfig)
	case strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/"):
		return fmt.Errorf("%w: the state key %q must not begin or end with \"/\"", ErrInvalidConfig, key)
	case strings.Contains(key, "//"):
		return fmt.Errorf("%w: the state key %q has an empty path segment (\"//\")", ErrInvalidConfig, key)
	}
	if err := s3lock.ValidateName(key + LockSuffix); err != nil {
		return fmt.Errorf("%w: the state key %q cannot name its lock %q: %w", ErrInvalidConfig, key, key+LockSuffix, err)
	}
	return nil
}

// ValidateWorkspaceKeyPrefix checks a workspace key prefix as the S3
// backend does.
func ValidateWorkspaceKeyPrefix(prefix string) error {
	if strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") || strings.Contains(prefix, "//") {
		return fmt.Errorf("%w: workspace_key_prefix %q must not begin or end with \"/\" or contain \"//\"", ErrInvalidConfig, prefix)
	}
	return nil
}

// ValidateWorkspace checks a workspace name: one path segment.
func ValidateWorkspace(ws string) error {
	if ws == "" || strings.Contains(ws, "/") {
		return fmt.Errorf("%w: workspace %q: a workspace name is one path segment, not empty and without \"/\"", ErrInvalidConfig, ws)
	}
	return nil
}

// ErrInvalidConfig matches the errors of a configuration the store cannot use.
var ErrInvalidConfig = errors.New("invalid state store configuration")

// Key is the object key of a workspace's state, as the S3 backend lays
// them out.
func (s *Store) Key(ws string) string {
	if ws == DefaultWorkspace {
		return s.cfg.Key
	}
	return s.cfg.WorkspaceKeyPrefix + "/" + ws + "/" + s.cfg.Key
}

// LockName is the s3lock lock of a workspace's state.
func (s *Store) LockName(ws string) string { return s.Key(ws) + LockSuffix }

// Bucket is the store's bucket.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// Workspaces lists the workspaces that have a state, the default first
// (always, as with the S3 backend: its state exists once written).
func (s *Store) Workspaces(ctx context.Context) ([]string, error) {
	prefix := s.cfg.WorkspaceKeyPrefix + "/"
	names := []string{}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(prefix)}
	for p := s3.NewListObjectsV2Paginator(s.api, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.opError("listing the workspaces under "+prefix, prefix, err)
		}
		for _, o := range page.Contents {
			ws, rest, ok := strings.Cut(strings.TrimPrefix(aws.ToString(o.Key), prefix), "/")
			if ok && rest == s.cfg.Key && ws != "" && ws != DefaultWorkspace {
				names = append(names, ws)
			}
		}
	}
	slices.Sort(names)
	return append([]string{DefaultWorkspace}, slices.Compact(names)...), nil
}

// Read returns a workspace's state without its fence mark; nil when it has
// none (no object, or a lock's placeholder). Under this process's lock it
// also records what it read: the next write must find it unchanged.
func (s *Store) Read(ctx context.Context, ws string) ([]byte, error) {
	body, etag, err := s.get(ctx, s.Key(ws))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if h := s.held[ws]; h != nil {
		h.etag = etag
	}
	s.mu.Unlock()
	return unmarked(body), nil
}

// Write stores a workspace's state. Under this process's lock the write is
// fenced: it lands only if the lease is the lock's newest and the object is
// as this holder last saw it, and otherwise fails with a *StaleWriteError,
// writing nothing. Without a lock (terraform -lock=false) it overwrites.
func (s *Store) Write(ctx context.Context, ws string, state []byte) error {
	key := s.Key(ws)
	s.mu.Lock()
	h := s.held[ws]
	s.mu.Unlock()
	if h == nil {
		return s.putUnlocked(ctx, key, state)
	}
	epoch := h.lease.Epoch()
	if err := h.lease.Err(); err != nil {
		return &StaleWriteError{Bucket: s.cfg.Bucket, Key: key, Lock: s.LockName(ws), Epoch: epoch, Err: err}
	}
	in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(marked(state, epoch)), ContentType: aws.String("application/json")}
	if h.etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(h.etag)
	}
	out, err := s.client.FencedPut(ctx, epoch, in)
	if err != nil {
		if fe := (*s3lock.FenceError)(nil); errors.As(err, &fe) {
			return &StaleWriteError{Bucket: s.cfg.Bucket, Key: key, Lock: s.LockName(ws), Epoch: epoch, Newer: fe.Current, Err: err}
		}
		return err
	}
	s.mu.Lock()
	h.etag = aws.ToString(out.ETag)
	s.mu.Unlock()
	return nil
}

// Delete removes a workspace's state object (its lock's objects stay, as
// its history; they are small and the next lock of that name continues
// their epochs).
func (s *Store) Delete(ctx context.Context, ws string) error {
	if ws == DefaultWorkspace {
		return fmt.Errorf("%w: the default workspace cannot be deleted", ErrInvalidConfig)
	}
	key := s.Key(ws)
	_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return s.opError("deleting the state", key, err)
	}
	return nil
}

// Lock acquires the lock of a workspace's state and seals the state: it
// rewrites the state object (or creates a placeholder) under the new epoch,
// so that no writer of an older epoch can land a write from then on, not
// even one already on its way. It returns the lock ID (LockID). A held
// lock is waited for as configured; a *s3lock.HeldError says who holds it.
func (s *Store) Lock(ctx context.Context, ws, operation string) (string, error) {
	s.mu.Lock()
	busy := s.held[ws] != nil
	s.mu.Unlock()
	if busy {
		return "", fmt.Errorf("the state of workspace %q (s3://%s/%s) is already locked by this Terraform process", ws, s.cfg.Bucket, s.Key(ws))
	}
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
		return "", err
	}
	etag, err := s.seal(ctx, s.Key(ws), lease.Epoch())
	if err != nil {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, fmt.Errorf("releasing the lease after the failed seal: %w", rerr))
		}
		return "", err
	}
	s.mu.Lock()
	s.held[ws] = &held{lease: lease, etag: etag}
	s.mu.Unlock()
	if s.cfg.Gone != nil {
		go s.abandonWhenGone(ws, lease)
	}
	return LockID(lease.Epoch()), nil
}

// Metadata keys of a state lock's lease: what a waiting user is shown.
const (
	MetaOperation = "operation"
	MetaWho       = "who"
	MetaState     = "state"
)

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
			Body: bytes.NewReader(marked(unmarked(body), epoch)), ContentType: aws.String("application/json")}
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
	return "", fmt.Errorf("sealing the state s3://%s/%s under epoch %d: it kept changing (written by runs that do not lock?): %w",
		s.cfg.Bucket, key, epoch, last)
}

// Unlock releases a lock. An ID of a lease this process does not hold is
// a force-unlock: the lease of that epoch is released if it is still the
// lock's current one (nothing to do if it ended already); the ID of an
// older lease is refused with a *NotCurrentError, so that a force-unlock
// never frees a newer run's lock.
func (s *Store) Unlock(ctx context.Context, ws, id string) error {
	s.mu.Lock()
	h := s.held[ws]
	if h != nil && LockID(h.lease.Epoch()) == id {
		delete(s.held, ws)
	} else {
		h = nil
	}
	s.mu.Unlock()
	if h != nil {
		return h.lease.Release(ctx)
	}
	return s.forceUnlock(ctx, ws, id)
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

// abandonWhenGone leaves a workspace's lease to lapse if Terraform goes
// away while it is held: stops renewing it without releasing it (a
// SIGKILLed Terraform wrote what it wrote; nothing will write or unlock any
// more, and the lock lapses after its lease).
func (s *Store) abandonWhenGone(ws string, lease *s3lock.Lease) {
	select {
	case <-lease.Done():
	case <-s.cfg.Gone:
		s.mu.Lock()
		if h := s.held[ws]; h != nil && h.lease == lease {
			delete(s.held, ws)
		}
		s.mu.Unlock()
		lease.Detach()
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

// get reads an object: its body and ETag, or nil and "" if it is absent.
func (s *Store) get(ctx context.Context, key string) ([]byte, string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key)}
	if s.ssec != nil {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = ssecHeaders(s.ssec)
	}
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

// putUnlocked writes a state without a lock, as Terraform's -lock=false
// asks: unconditionally, with the configured encryption.
func (s *Store) putUnlocked(ctx context.Context, key string, state []byte) error {
	in := &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(unmarked(state)), ContentType: aws.String("application/json")}
	o := s.cfg.Objects
	switch {
	case s.ssec != nil:
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = ssecHeaders(s.ssec)
	case o.Encrypt && o.KMSKeyID != "":
		in.ServerSideEncryption, in.SSEKMSKeyId = types.ServerSideEncryptionAwsKms, aws.String(o.KMSKeyID)
	case o.Encrypt:
		in.ServerSideEncryption = types.ServerSideEncryptionAes256
	}
	if o.ACL != "" {
		in.ACL = types.ObjectCannedACL(o.ACL)
	}
	if _, err := s.api.PutObject(ctx, in); err != nil {
		return s.opError("writing the state", key, err)
	}
	return nil
}

func ssecHeaders(key []byte) (alg, k, sum *string) {
	h := md5.Sum(key)
	return aws.String("AES256"), aws.String(base64.StdEncoding.EncodeToString(key)), aws.String(base64.StdEncoding.EncodeToString(h[:]))
}

func notFound(err error) bool {
	var nsk *types.NoSuchKey
	var ae smithy.APIError
	return errors.As(err, &nsk) || errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchKey")
}

func (s *Store) opError(doing, key string, err error) error {
	return fmt.Errorf("%s s3://%s/%s: %w", doing, s.cfg.Bucket, key, err)
}
