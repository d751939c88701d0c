package runguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// GuardArg is the hidden first argument that makes the provider binary run
// as a run guard (see Serve).
const GuardArg = "__s3lock_run_guard"

// ClientConfig is how the guard builds the s3lock client of a lease it
// holds: the provider's AWS settings and lock options. It travels over the
// guard's socket, which only the user can reach.
type ClientConfig struct {
	AWS                 awsclient.Options `json:"aws"`
	Holder              string            `json:"holder"`
	ExpectedBucketOwner string            `json:"expected_bucket_owner,omitempty"`
	// Objects are the encryption and ACL every write needs on this bucket
	// (the SSE-C key too: it crosses only the guard's private socket).
	Objects awsclient.ObjectSettings `json:"objects,omitzero"`
}

// Lease is what the guard tells about a lease it holds for the run.
type Lease struct {
	Token      s3lock.Token  `json:"token"`
	Key        string        `json:"key"`
	Holder     string        `json:"holder"`
	AcquiredAt time.Time     `json:"acquired_at"`
	ExpiresAt  time.Time     `json:"expires_at"`
	Duration   time.Duration `json:"duration"`
	// HeldUntilAtMost is the lease's cap (s3lock.WithMaxHold); zero
	// without one.
	HeldUntilAtMost time.Time `json:"held_until_at_most,omitzero"`
	// Lost says why the lease was lost during the run; empty while held.
	Lost string `json:"lost,omitempty"`
	// LostReason is the SDK's reason for it (s3lock.LostMaxHold: it
	// reached its cap); empty while held, and when the guard died.
	LostReason s3lock.LossReason `json:"lost_reason,omitempty"`
}

// The requests a provider process sends, one JSON object a line, each
// answered by one response line.
const (
	// hello opens every connection: the provider names its run (Run), and
	// the guard refuses a provider of another run.
	opHello = "hello"
	// claim asks for the run's lease of Bucket/Name on the store of Config:
	// the guard answers with the lease if the run holds it, or grants the
	// caller the right to acquire it (Granted), making every other claim of
	// that lock wait until the caller adopts or abandons it.
	opClaim    = "claim"
	opAdopt    = "adopt"    // take over Token (just acquired, after a granted claim) for the rest of the run
	opAbandon  = "abandon"  // the granted claim's acquisition failed
	opStatus   = "status"   // the lease of Token
	opBye      = "bye"      // the provider process is shutting down cleanly
	opOrphaned = "orphaned" // the provider process outlived terraform (it was killed)
)

type request struct {
	Op     string        `json:"op"`
	Run    *Run          `json:"run,omitempty"`
	Bucket string        `json:"bucket,omitempty"`
	Name   string        `json:"name,omitempty"`
	Token  *s3lock.Token `json:"token,omitempty"`
	Config *ClientConfig `json:"config,omitempty"`
}

type response struct {
	Lease   *Lease `json:"lease,omitempty"`
	Granted bool   `json:"granted,omitempty"`
	Error   string `json:"error,omitempty"`
}

// maxLine bounds one line of the protocol, request or response. The largest
// request, an adopt, carries a token and a client configuration: a few KiB,
// tens only with an inline web identity token, session policies and session
// tags at STS's limits. The guard reads no further than this into a longer
// line: it refuses it and closes the connection, so no process of the run
// can make it buffer a line without end (Client.call refuses to send one).
const maxLine = 64 << 10

// errLineTooLong is a line longer than maxLine.
var errLineTooLong = fmt.Errorf("a line longer than %d bytes", maxLine)

// newLineReader returns a reader for readLine.
func newLineReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, maxLine) }

// readLine reads one line, its newline included, valid until the next read
// from r; a line longer than maxLine is errLineTooLong, read only that far.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, errLineTooLong
	}
	return line, err
}

// leaseKey names a lock on one store: two provider configurations that
// point at different stores never share a lease.
func leaseKey(cfg ClientConfig, bucket, name string) string {
	return cfg.AWS.Endpoint + "|" + cfg.AWS.Region + "|" + cfg.ExpectedBucketOwner + "|" + bucket + "/" + name
}

// Timing of the guard.
const (
	// pollInterval is how often the guard checks that terraform is alive:
	// a finished run's leases are released within about this long.
	pollInterval = 100 * time.Millisecond
	// orphanWait is how long, after terraform is gone, the guard waits for
	// the provider processes' connections to close. Terraform waits for its
	// providers to exit before it exits itself, so after a clean end they
	// are closed already; one still open means a provider outlived a killed
	// terraform.
	orphanWait = 500 * time.Millisecond
	// releaseTimeout bounds releasing the run's leases at its end.
	releaseTimeout = 15 * time.Second
	// startTimeout bounds waiting for a newly started guard's socket.
	startTimeout = 10 * time.Second
	// requestTimeout bounds one request to the guard that does not wait
	// for another provider process (all but claim).
	requestTimeout = 45 * time.Second
	// adoptTimeout bounds the guard's work on an adopt (reading the lease
	// back and renewing it); shorter than requestTimeout, so the provider
	// never gives up on an adopt the guard then completes.
	adoptTimeout = 30 * time.Second
	// minimumLease is the shortest lease the guard can take over: it reads
	// the lease back (the store's Date may lag two seconds) and renews it.
	minimumLease = 5 * time.Second
	// logKeep is how long the log of a guard whose run ended uneventfully
	// is kept; others (a lost or lapsed lease) are kept this long too, and
	// a guard that starts removes older ones.
	logKeep = 7 * 24 * time.Hour
)

// MinimumLease is the shortest lease_duration a run-long lease can have.
const MinimumLease = minimumLease
