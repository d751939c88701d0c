package s3lock

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/s3lock/terraform-provider-s3lock/internal/textsafe"
	"github.com/s3lock/terraform-provider-s3lock/internal/transfer"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// Defaults and limits of the options.
const (
	// DefaultLeaseDuration is how long a lease stays valid without renewal:
	// long enough that a pause of a few seconds (GC, a slow request) does
	// not cost the lease, short enough that a crashed holder blocks others
	// for only a minute.
	DefaultLeaseDuration = 60 * time.Second
	// MinLeaseDuration is the shortest lease: stores report times with
	// one-second resolution, and the protocol adds two seconds of slack to
	// every expiry it judges from them.
	MinLeaseDuration = 2 * time.Second
	// MaxLeaseDuration is the longest lease.
	MaxLeaseDuration = 30 * 24 * time.Hour
	// defaultHistory is how many of a lock's most recent epoch objects are
	// kept; older ones are deleted so acquisition never has to page through
	// history. Ten is enough to see the last few handoffs in the bucket.
	defaultHistory = 10
	// maxHistory keeps the retained epochs (plus those not yet old enough to
	// delete) within one 1,000-key LIST page.
	maxHistory = 500
	// DefaultPollInterval is how often a waiting Acquire checks whether the
	// holder released the lock: one small conditional GET five times a
	// second hands a released lock over in about a tenth of a second.
	DefaultPollInterval = 200 * time.Millisecond
	// defaultRequestTimeout bounds each S3 call, including the SDK's retries.
	defaultRequestTimeout = transfer.RequestTimeout
)

// Option configures a Client (New) or one acquisition (Acquire,
// TryAcquire, Do). The options that say how a lease is taken and held
// (WithLeaseDuration, WithMaxHold, WithMetadata, WithoutAutoRenew, WithWait,
// WithWaitObserver, WithOrder, WithSlots) may be given to New, as the
// client's defaults for every acquisition, or to one acquisition, for it
// alone, overriding the client's (Resume, which takes over a lease its
// acquisition set up, takes WithoutAutoRenew only); the others (WithHolder, WithClock,
// WithLogger, WithObserver, WithPollInterval, WithRequestTimeout,
// WithExpectedBucketOwner, WithACL, WithServerSideEncryption,
// WithSSECustomerKey) configure the client, and an acquisition refuses them
// with ErrInvalidConfig.
type Option func(*settings) error

// settings is what an Option sets: the client's configuration (nil when an
// acquisition applies its options) and an acquisition's.
type settings struct {
	client  *config
	acquire *acquireConfig
	// takeover is set for Resume's options (leaseOption).
	takeover bool
}

// clientOption is an Option that only New takes: name is the option's, for
// the error an acquisition gets.
func clientOption(name string, set func(*config) error) Option {
	return func(s *settings) error {
		if s.client == nil {
			return invalid("%s configures the client: pass it to New, not to an acquisition", name)
		}
		return set(s.client)
	}
}

// leaseOption is an Option that New takes as a default for every
// acquisition and an acquisition takes for itself. Resume takes over a lease
// whose duration, metadata, order and slots its acquisition set: of these
// options it takes WithoutAutoRenew only, and refuses the others by name.
func leaseOption(name string, set func(*acquireConfig) error) Option {
	return func(s *settings) error {
		if s.takeover && name != "WithoutAutoRenew" {
			return invalid("%s does not apply to Resume: a taken-over lease keeps what its acquisition set "+
				"(duration, maximum hold, metadata, order, slots); Resume takes WithoutAutoRenew only", name)
		}
		return set(s.acquire)
	}
}

type config struct {
	holder string
	// acquire is the client's defaults for every acquisition: the options
	// given to New that say how a lease is taken.
	acquire             acquireConfig
	renewInterval       time.Duration
	renewIntervalSet    bool
	logger              *slog.Logger
	clock               Clock
	expectedBucketOwner string
	history             int
	pollInterval        time.Duration
	requestTimeout      time.Duration
	observer            observe.Observer
	objects             objectSettings
}

func defaultConfig() config {
	return config{
		acquire:        acquireConfig{leaseDuration: DefaultLeaseDuration, autoRenew: true},
		logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		clock:          systemClock{},
		history:        defaultHistory,
		pollInterval:   DefaultPollInterval,
		requestTimeout: defaultRequestTimeout,
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// WithHolder sets the identity written into leases, shown to everyone who
// finds the lock held. The default is user@host:pid plus a random suffix,
// drawn once per process.
func WithHolder(id string) Option {
	return clientOption("WithHolder", func(c *config) error {
		if err := ValidateHolder(id); err != nil {
			return err
		}
		c.holder = id
		return nil
	})
}

// maxHolderBytes bounds a holder identity: a name, not a document.
const maxHolderBytes = 256

// ValidateHolder checks a holder identity: non-blank UTF-8 of graphic
// characters (no control characters such as escape or newline, no format
// characters such as bidirectional overrides), at most 256 bytes. The error
// matches ErrInvalidConfig. Text read back from a lease that breaks this
// rule is shown escaped.
func ValidateHolder(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return invalid("holder is empty or blank")
	case len(id) > maxHolderBytes:
		return invalid("holder is %d bytes long; the limit is %d", len(id), maxHolderBytes)
	case !utf8.ValidString(id):
		return invalid("holder %q is not valid UTF-8", id)
	case !textsafe.Safe(id):
		return invalid("holder %q contains control or format characters (escapes, newlines, tabs, bidirectional overrides)", id)
	}
	return nil
}

// WithLeaseDuration sets how long a lease stays valid without renewal
// (default DefaultLeaseDuration, between MinLeaseDuration and
// MaxLeaseDuration): given to New, for every acquisition of the client;
// given to an acquisition, for its lease alone. A lease renews every third
// of it.
func WithLeaseDuration(d time.Duration) Option {
	return leaseOption("WithLeaseDuration", func(a *acquireConfig) error {
		if err := validateLeaseDuration(d); err != nil {
			return err
		}
		a.leaseDuration = d
		return nil
	})
}

// WithMaxHold caps a lease's tenure: it is not renewed past d after it was
// acquired (counted from when the acquiring write was sent). Renewals near
// the cap write a validity that ends at it; when it is reached the lease
// ends as lost, with Reason LostMaxHold: Done closes, and Renew fails. The
// lease's epoch object then stays this handle's until it lapses (within
// the safety margin and a few seconds of the store's clock), and Release
// releases it at once, so that whoever stops its work at Done and releases
// frees the lock for the next holder without a wait. The cap is written
// into the lease (State's HeldUntilAtMost shows it to everyone), and a
// Resume keeps it (its trust cut there; it renews with the whole lease).
// Each lease of a lock set (package lockset) is capped from its own
// acquisition: the first lock's cap runs while the set waits for the
// others, so give it the wait as well as the work. d must be
// longer than the lease duration. Given to New, for every acquisition of
// the client; given to an acquisition, for its lease alone. Without it a
// lease is renewed for as long as its holder runs (PROTOCOL.md §6).
func WithMaxHold(d time.Duration) Option {
	return leaseOption("WithMaxHold", func(a *acquireConfig) error {
		if d <= 0 {
			return invalid("maximum hold %s is not positive: leave WithMaxHold out for no cap", d)
		}
		a.maxHold = d
		return nil
	})
}

// checkMaxHold checks that a's cap, if any, is longer than its lease: a cap
// within the first lease would end the lease before its first renewal.
func (a *acquireConfig) checkMaxHold() error {
	if a.maxHold > 0 && a.maxHold <= a.leaseDuration {
		return invalid("maximum hold %s (WithMaxHold) must be longer than the lease duration %s (WithLeaseDuration): "+
			"raise the maximum hold or shorten the lease", a.maxHold, a.leaseDuration)
	}
	return nil
}

func validateLeaseDuration(d time.Duration) error {
	if d < MinLeaseDuration || d > MaxLeaseDuration {
		return invalid("lease duration %s is outside [%s, %s]", d, MinLeaseDuration, MaxLeaseDuration)
	}
	return nil
}

// withRenewInterval sets how often a lease renews itself in the background
// (at least 100ms), for tests. A lease renews every third of its duration,
// as etcd's session keeps its lease alive at a third of its TTL; New
// rejects an interval longer than half of it, which would leave no time to
// retry a failed renewal.
func withRenewInterval(d time.Duration) Option {
	return clientOption("withRenewInterval", func(c *config) error {
		if d < minRenewInterval {
			return invalid("renew interval %s is shorter than %s", d, minRenewInterval)
		}
		c.renewInterval = d
		c.renewIntervalSet = true
		return nil
	})
}

// WithLogger sets the logger for acquisitions, renewals, releases and
// waits. The default discards everything.
func WithLogger(l *slog.Logger) Option {
	return clientOption("WithLogger", func(c *config) error {
		if l == nil {
			return invalid("logger is nil")
		}
		c.logger = l
		return nil
	})
}

// WithClock sets the clock (default: the system clock, time.Now).
func WithClock(clk Clock) Option {
	return clientOption("WithClock", func(c *config) error {
		if clk == nil {
			return invalid("clock is nil")
		}
		c.clock = clk
		return nil
	})
}

// WithExpectedBucketOwner makes every request fail unless the bucket belongs
// to this AWS account id, protecting against a bucket of the same name in
// another account.
func WithExpectedBucketOwner(accountID string) Option {
	return clientOption("WithExpectedBucketOwner", func(c *config) error {
		if len(accountID) != 12 || strings.Trim(accountID, "0123456789") != "" {
			return invalid("expected bucket owner %q is not a 12-digit AWS account id", accountID)
		}
		c.expectedBucketOwner = accountID
		return nil
	})
}

// withHistory sets how many of a lock's most recent epoch objects are kept
// (default 10, between 1 and 500), for tests. Older epochs are deleted by
// the lock's later holders, a few at a time.
func withHistory(epochs int) Option {
	return clientOption("withHistory", func(c *config) error {
		if epochs < 1 || epochs > maxHistory {
			return invalid("history %d is outside [1, %d]", epochs, maxHistory)
		}
		c.history = epochs
		return nil
	})
}

// WithPollInterval sets how often a waiting Acquire checks the holder's
// lease (default DefaultPollInterval, between 10ms and 1m). Each check is
// one small GET; polls start one interval apart at most, start to start,
// and up to 10% early, so that many waiters do not poll in step.
func WithPollInterval(d time.Duration) Option {
	return clientOption("WithPollInterval", func(c *config) error {
		if d < minPollInterval || d > maxPollInterval {
			return invalid("poll interval %s is outside [%s, %s]", d, minPollInterval, maxPollInterval)
		}
		c.pollInterval = d
		return nil
	})
}

// WithObserver makes the client report what it does to o: acquisitions and
// their waits, renewals, lost and released leases, and every S3 request
// (Observer says how o is called). The package s3lockotel turns the events
// into OpenTelemetry metrics and spans.
func WithObserver(o observe.Observer) Option {
	return clientOption("WithObserver", func(c *config) error {
		if o == nil {
			return invalid("WithObserver needs an observer")
		}
		c.observer = o
		return nil
	})
}

// WithRequestTimeout bounds each S3 call including the SDK's own retries
// (default 30s, at least 100ms).
func WithRequestTimeout(d time.Duration) Option {
	return clientOption("WithRequestTimeout", func(c *config) error {
		if d < minRequestTimeout {
			return invalid("request timeout %s is shorter than %s", d, minRequestTimeout)
		}
		c.requestTimeout = d
		return nil
	})
}

// directoryBucketSuffix ends the name of every S3 directory bucket
// (BASE--ZONE--x-s3); general purpose buckets may not end so.
const directoryBucketSuffix = "--x-s3"

// isDirectoryBucket reports whether bucket is named as an S3 directory
// bucket (S3 Express One Zone), which lists keys in no set order, does not
// support StartAfter, and lists only prefixes that end in "/": s3lock lists
// such a bucket whole (PROTOCOL.md §8).
func isDirectoryBucket(bucket string) bool { return strings.HasSuffix(bucket, directoryBucketSuffix) }

// validateBucket checks a bucket name against S3's naming rules
// (ValidateConfig(bucket) without options).
func validateBucket(bucket string) error {
	bad := func(reason string) error {
		return invalid("bucket name %q %s (S3 bucket names are 3-63 lowercase letters, digits, dots and hyphens)", bucket, reason)
	}
	switch {
	case bucket == "":
		return invalid("bucket name is empty")
	case len(bucket) < 3 || len(bucket) > 63:
		return bad(fmt.Sprintf("is %d characters long", len(bucket)))
	case strings.Contains(bucket, ".."):
		return bad("contains \"..\"")
	case net.ParseIP(bucket) != nil:
		return bad("is formatted as an IP address")
	}
	for i, r := range bucket {
		lowerOrDigit := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
		if !lowerOrDigit && r != '.' && r != '-' {
			return bad(fmt.Sprintf("contains %q", r))
		}
		if (i == 0 || i == len(bucket)-1) && !lowerOrDigit {
			return bad("must start and end with a letter or digit")
		}
	}
	return nil
}

// acquireConfig is how one acquisition takes and holds its lease.
type acquireConfig struct {
	metadata      map[string]string
	leaseDuration time.Duration
	// maxHold is WithMaxHold's cap on the lease's tenure; 0 for none.
	maxHold       time.Duration
	renewInterval time.Duration
	autoRenew     bool
	// wait is WithWait's bound (waitSet): fail fast, then wait up to it;
	// 0 tries once. Without WithWait, wait until ctx ends.
	wait    time.Duration
	waitSet bool
	onWait  func(*HeldError)
	order   Order   // "" or OrderNone: ignore the line
	slots   int     // 0 or 1: a mutex; n > 1: WithSlots(n)
	slot    slotRef // set when acquiring (or taking over) one slot of a slot lock
	// shared is WithShared: a share instead of an exclusive lease.
	shared bool
	// try is set for a TryAcquire: an exclusive acquisition that finds
	// shares does not wait for them (awaitShares).
	try bool
	// pending marks the exclusive epoch an acquisition creates above a
	// shared or still-pending one (createHolding).
	pending bool
	// unobserved makes the lease report no lease events (the store check's
	// probe lease: no acquisition of the caller's).
	unobserved bool
}

// slotRef says which slot of which slot lock a lease holds; the zero value
// is a mutex's lease.
type slotRef struct {
	lock        string
	slot, slots int
}

// WithMetadata attaches string metadata to the lease (at most 16 KiB in
// all, graphic characters only, as ValidateHolder), shown by Current to
// anyone who reads the lock.
func WithMetadata(m map[string]string) Option {
	return leaseOption("WithMetadata", func(a *acquireConfig) error {
		if n := metadataSize(m); n > maxMetadataBytes {
			return invalid("metadata is %d bytes; the limit is %d", n, maxMetadataBytes)
		}
		for k, v := range m {
			if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) {
				return invalid("metadata keys must be non-empty and keys and values valid UTF-8 (key %q)", k)
			}
			if !textsafe.Safe(k) || !textsafe.Safe(v) {
				return invalid("metadata %q=%q contains control or format characters (escapes, newlines, tabs, "+
					"bidirectional overrides); metadata is shown to whoever reads the lock, so it is held to a holder's rule", k, v)
			}
		}
		a.metadata = make(map[string]string, len(m))
		for k, v := range m {
			a.metadata[k] = v
		}
		return nil
	})
}

// WithoutAutoRenew leaves renewal to the caller: the lease is not renewed in
// the background and Done closes only when Renew or Release finds it lost.
// Use it when the process that acquires will not live as long as the lease
// (pipelines, Terraform). Given to New, it holds for every acquisition of
// the client: no option turns renewal back on for one.
func WithoutAutoRenew() Option {
	return leaseOption("WithoutAutoRenew", func(a *acquireConfig) error {
		a.autoRenew = false
		return nil
	})
}

// WithWait bounds how long Acquire waits for a held lock: d = 0 tries once,
// as TryAcquire does; d > 0 waits up to d, counted from when Acquire first
// finds the lock held, so a slow store does not turn a free lock into a
// timeout and "wait up to d" means for the holder, not for the store. The
// attempts before that are bounded too, by d but never by less than 10s: a
// store that answers too slowly (or not at all) ends Acquire there with an
// error matching context.DeadlineExceeded, so Acquire returns within about
// max(d, 10s) + d. With WithWait, any failure of the first attempt other
// than ErrHeld (an unreachable store, denied access) is returned at once,
// so that a misconfiguration is reported without waiting; once it has found
// the lock held, Acquire rides out transient failures as it always does.
// When d has passed, Acquire returns an error matching
// context.DeadlineExceeded that wraps the last *HeldError. Without WithWait,
// Acquire waits as long as ctx allows and retries every transient failure.
// This is the choice a command-line tool or Terraform offers: "wait up to d,
// 0 = do not wait". TryAcquire ignores it.
func WithWait(d time.Duration) Option {
	return leaseOption("WithWait", func(a *acquireConfig) error {
		if d < 0 {
			return invalid("wait %s is negative; 0 tries once", d)
		}
		a.wait, a.waitSet = d, true
		return nil
	})
}

// WithWaitObserver sets a function that a waiting Acquire calls when it finds
// the lock held: at once, whenever the holder or epoch changes, and at most
// once a second otherwise. It must not block.
func WithWaitObserver(fn func(*HeldError)) Option {
	return leaseOption("WithWaitObserver", func(a *acquireConfig) error {
		a.onWait = fn
		return nil
	})
}

// WithOrder says in which order a waiting Acquire takes its turn
// (PROTOCOL.md §13): OrderNone (the default) races for a released lock as
// every waiter without order does; OrderFIFO waits in the lock's line and is
// served in the order the ordered waiters joined it; OrderNewest waits in the
// line too, and gives up with ErrSuperseded when a newer OrderNewest waiter
// joins. When several order options are given, the last one counts. An
// ordered TryAcquire does not take a free lock while others wait in line.
func WithOrder(o Order) Option {
	return leaseOption("WithOrder", func(a *acquireConfig) error {
		if _, err := ParseOrder(string(o)); err != nil {
			return err
		}
		a.order = o
		return nil
	})
}

// MaxSlots is the largest n of WithSlots(n). A waiter polls the held slots in
// turn and Current reads every slot, so n is kept to a size where that stays
// a handful of requests a second and one Current stays quick.
const MaxSlots = 64

// WithSlots makes the lock admit up to n holders at once instead of one: a
// semaphore (PROTOCOL.md §14). The lock's newest epoch object then becomes a
// marker that records n, and each holder holds one of its n slots, a lock of
// its own with its own epochs: the lease's Token().Epoch is the fencing token of its
// slot (Token.Slot), growing with every holder of that slot, not across
// slots. Every holder of the lock must use the same n: an acquirer with
// another n, or without WithSlots, gets an *SlotsError (ErrSlotsMismatch) and
// never a slot. A lock becomes a slot lock when an acquirer with WithSlots
// finds it free; an operator turns it back (or changes n) by force-releasing
// the marker's epoch once no slot is held. WithSlots(1) is the plain mutex.
// With an order (WithOrder), waiters line up in the lock's one line and the
// head of the line takes whichever slot frees first. n must be between 1
// and MaxSlots.
func WithSlots(n int) Option {
	return leaseOption("WithSlots", func(a *acquireConfig) error {
		if n < 1 || n > MaxSlots {
			return invalid("slots %d is out of range: a lock admits 1 to %d holders", n, MaxSlots)
		}
		a.slots = n
		return nil
	})
}

func (c *Client) acquireConfig(opts []Option) (acquireConfig, error) {
	a := c.cfg.acquire
	a.metadata = maps.Clone(a.metadata) // the client's defaults stay its own
	if err := apply(settings{acquire: &a}, opts); err != nil {
		return a, err
	}
	if err := a.checkMaxHold(); err != nil {
		return a, err
	}
	if err := a.checkShared(); err != nil {
		return a, err
	}
	a.renewInterval = c.renewIntervalFor(a.leaseDuration)
	return a, nil
}

// takeoverConfig is Resume's configuration of a lease it takes over: in the
// background unless opts has WithoutAutoRenew, the one option Resume takes;
// ref names its slot. The lease's duration is its acquisition's (takeOver
// sets it once it has read the lease).
func takeoverConfig(opts []Option, ref slotRef) (acquireConfig, error) {
	a := acquireConfig{autoRenew: true, slot: ref}
	err := apply(settings{acquire: &a, takeover: true}, opts)
	return a, err
}

// apply applies opts to s in order; the first that fails ends it.
func apply(s settings, opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return invalid("nil Option")
		}
		if err := o(&s); err != nil {
			return err
		}
	}
	return nil
}

// renewIntervalFor returns the renew interval for a lease of duration d: the
// client's explicit interval if it is at most half of d, else a third of d.
func (c *Client) renewIntervalFor(d time.Duration) time.Duration {
	if c.cfg.renewIntervalSet && c.cfg.renewInterval <= d/2 {
		return c.cfg.renewInterval
	}
	return d / 3
}
