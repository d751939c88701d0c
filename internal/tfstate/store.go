// Package tfstate is the protocol of the provider's state store: Terraform
// states kept under the keys Terraform's S3 backend uses, locked by s3lock
// leases, and written only by the lease that is the lock's newest (fenced
// writes, PROTOCOL.md §15). It knows Terraform's state layout and nothing of
// the plugin framework; the provider's state store only translates.
//
// keys.go is where states and locks are; lock.go takes, seals and frees a
// state's lock; objects.go reads, writes and deletes states; mark.go is the
// fence mark in a state's bytes.
package tfstate

import (
	"errors"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Config is where the states are and how their locks are taken.
type Config struct {
	Bucket string
	// Key is the default workspace's state; the others' are at
	// WorkspaceKeyPrefix/WORKSPACE/Key.
	Key string
	// WorkspaceKeyPrefix is where the other workspaces' states are; ""
	// means DefaultWorkspaceKeyPrefix (an empty prefix is refused by
	// ValidateWorkspaceKeyPrefix: it would make the default key ambiguous).
	WorkspaceKeyPrefix string
	// Lease is the lease of a lock (0: the client's default); it renews
	// while the store's process runs and lapses if it dies.
	Lease time.Duration
	// MaxHold caps a lock's tenure (s3lock.WithMaxHold; 0: none, else
	// longer than Lease): a run that holds it longer loses it, and its
	// later writes and unlock are refused.
	MaxHold time.Duration
	// Wait is how long Lock waits for a held lock (0: it fails at once),
	// in Order.
	Wait  time.Duration
	Order s3lock.Order
	// Objects are the encryption and ACL of state objects: the s3lock
	// client applies them to fenced writes; the store to its own reads and
	// unlocked writes.
	Objects awsclient.ObjectSettings
	// ExpectedBucketOwner is the account that must own the bucket ("": not
	// checked), for the store's own requests; the client checks its own.
	ExpectedBucketOwner string
	// Who says who locks ("user@host"), shown to those who wait.
	Who string
	// Gone, when it closes, says that the Terraform process this store
	// serves is gone: the leases it holds are then left to lapse, and
	// their writes refused. nil: never.
	Gone <-chan struct{}
	// Now is the store's clock (nil: time.Now): a write is refused once its
	// lease's ExpiresAt has passed by it.
	Now func() time.Time
	// LockFile makes an exclusive lock also hold the S3 backend's lock
	// file of the state (KEY.tflock, lockfile.go), so that runs of
	// Terraform's S3 backend with use_lockfile and runs through this store
	// exclude each other. A shared lock (a plan's) does not take it: the
	// file admits one holder, and plans would exclude each other again; an
	// S3-backend run that knows only the lock file may then lock the state
	// while plans through s3lock read it (PROTOCOL.md §15).
	LockFile bool
	// WaitObserver, if set, is called while a Lock waits: with a
	// *s3lock.HeldError while the state's s3lock lock is held (or others
	// are ahead in its line), with a *LockFileHeldError while a run
	// without s3lock holds the lock file. It must not block.
	WaitObserver func(held error)
	// OnLost, if set, is called once when a lease this store holds ends
	// other than by its Unlock (lost, ran out, force-released, abandoned),
	// with the lease's error: the writes under it are refused from then on.
	OnLost func(ws string, err error)
}

// Store keeps the states of one configuration. Every method that takes a
// workspace refuses one whose state it would not keep ("..", "a/b", a name
// Terraform would not take), with an error matching ErrInvalidConfig; a
// state of more than MaxStateSize is neither written nor read
// (ErrStateTooLarge).
type Store struct {
	api    s3lock.S3API
	client *s3lock.Client
	cfg    Config

	mu   sync.Mutex
	held map[string]*held // by workspace

	// maxState and timeout are MaxStateSize and transferTimeout, but for
	// tests (export_test.go).
	maxState int64
	timeout  func(size int64) time.Duration
}

// held is a lock this process took: its lease, and the state object as the
// holder last saw it (its ETag), which its next write must find. A lock
// being taken has no lease yet; an abandoned one (Config.Gone) keeps its
// entry, so that a late write is refused rather than taken for one
// without a lock.
type held struct {
	lease     *s3lock.Lease
	etag      string
	shared    bool // a plan's shared lock: it writes nothing, and refuses writes
	abandoned bool
	unlocking bool // its Unlock has begun: its end is not a loss
	// placeholder is the ETag of the seal when it was a placeholder (no
	// state yet); "" otherwise, and from the moment a write under the lock
	// sends its PUT (which may land unseen).
	placeholder string
	// writes is held for reading by each write under the lock, from its
	// checks to its PUT's answer, and for writing by Unlock while it drops
	// the placeholder, removes the lock file and releases the lease: no
	// write is in flight then, and none starts after (unlocking).
	writes sync.RWMutex
}

// New checks the configuration. client must lock in cfg.Bucket.
func New(api s3lock.S3API, client *s3lock.Client, cfg Config) (*Store, error) {
	if cfg.WorkspaceKeyPrefix == "" {
		cfg.WorkspaceKeyPrefix = DefaultWorkspaceKeyPrefix
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
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
	return &Store{api: api, client: client, cfg: cfg, held: map[string]*held{}, maxState: MaxStateSize, timeout: transferTimeout}, nil
}

// ErrInvalidConfig matches the errors of a configuration the store cannot use.
var ErrInvalidConfig = errors.New("invalid state store configuration")

// Bucket is the store's bucket.
func (s *Store) Bucket() string { return s.cfg.Bucket }
