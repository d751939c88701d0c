// Package s3lock turns an S3 bucket into a lock service: no database, no
// coordinator, just objects created with S3's conditional writes.
//
// # Leases and epochs
//
// A lock is a key path, such as "prod/db-migration". Each acquisition of it
// creates the next epoch object, prod/db-migration/lock-0000000042.json, with
// If-None-Match: *, so of all contenders exactly one succeeds. A new epoch is
// created only after the previous one was released or has lapsed. The epoch
// is the lease's fencing token: it only grows, so whatever the lock protects
// can refuse writes from an older holder (see package fence).
//
// A lease is valid for a duration (WithLeaseDuration, default 60s) and renews
// itself in the background (every third of it by default). Renewals and the
// release are compare-and-swap writes (If-Match) on the lease's own epoch
// object. A holder that cannot renew stops trusting its lease before anyone
// else could consider it lapsed; expiry is judged by the store's clock only
// (Last-Modified against Date of the same response), so clients whose clocks
// disagree by hours still never hold a lock together. The Done channel of a
// Lease closes when it ends, and Err says whether it was released or lost; a
// timer ends the lease at its trust deadline even while a renewal hangs on a
// store that does not answer.
//
// # Guarantees and failure model
//
// Mutual exclusion holds as long as the store enforces conditional writes
// (check with storecheck.Verify) and reads are strongly consistent, as on
// AWS S3.
// Requests whose outcome is unknown — a timeout, a reset connection, a 5xx, a
// 412 that answers the SDK's retry of our own write — are resolved by
// reading the object back and comparing a per-acquisition nonce, so they
// never leave an orphaned lease or two holders. Acquiring a free lock costs
// three requests (LIST, GET, PUT) and releasing one, however many epochs the
// lock has had: old epochs are deleted by later holders, with a guard against
// a paused contender re-creating one. No lease protects against a holder
// that pauses after checking it; pass the epoch to the protected resource.
// PROTOCOL.md, next to this file, has the state machine, every request, and
// the safety argument.
//
// # Use
//
//	locks, err := s3lock.New(s3.NewFromConfig(cfg), "my-locks")
//	...
//	lease, err := locks.Acquire(ctx, "prod/db-migration") // waits; ctx bounds the wait
//	if err != nil { ... }
//	defer lease.Release(ctx)
//	// work; use lease.Token().Epoch as a fencing token; watch lease.Done()
//
// In short:
//
//   - Take a lock: Acquire (waits as long as ctx allows, or up to WithWait;
//     WithWait(0) tries once), TryAcquire (once), Do (acquire, run, release,
//     with a context cancelled if the lease is lost).
//   - Wait in order: WithOrder(OrderFIFO) serves waiters in the order they
//     joined the lock's line, across processes and hosts; OrderNewest makes
//     older waiters give up with ErrSuperseded; Line shows who waits.
//   - Share a lock: WithSlots(n) admits n holders at once.
//   - Hold a lease: Token (what names it: its lock, and Epoch, the fencing
//     token), State (holder, metadata, expiry), Done and Err (is it over?),
//     Release, Renew (with WithoutAutoRenew).
//   - Name a lease: a Token. Resume takes it over (Detach hands it on),
//     Lookup reads it, ForceRelease is the operator's unlock; a Token
//     without a Nonce names an epoch whoever holds it.
//   - Read locks: Current, List (State.Phase: free, held, released,
//     lapsed), Watch (leader election: Do leads, Watch follows).
//   - Observe: WithObserver (the events are package observe's; s3lockotel
//     turns them into OpenTelemetry).
//
// Errors are sentinels to test with errors.Is (ErrHeld, ErrLeaseLost,
// ErrUnavailable, ErrAccessDenied, ...) and typed errors with the details
// (HeldError, LeaseLostError, SlotsError, SupersededError, NameError);
// every error names the bucket and key it concerns, and a failed S3 request
// still unwraps to the AWS SDK's error (errors.As finds smithy.APIError). ErrLeaseLost is the one answer to "is this
// lease over?", from every call that can find out; LeaseLostError.Reason says
// how it ended.
//
// # Sub-packages
//
// Two capabilities a caller imports alone are packages of their own, on
// the same client and its request layer (one per-request timeout, errors
// that match this package's sentinels):
//
//   - fence: Put refuses a write to an S3 object under an epoch older than
//     the last writer's (a *fence.Error). The code that writes what a lock
//     protects needs it, as the Terraform state store does, not the code
//     that takes the lock.
//   - storecheck: Verify and Run answer "can this store and these
//     credentials hold locks at all?" once, before anyone relies on the
//     bucket: `s3lock verify`, the provider's s3lock_verify action or a
//     setup script, not the code that locks.
//
// Lock sets, several locks taken together all or none in one global order,
// are the package lockset: built on this package's public API alone (a set
// is its locks' own acquisitions), for the job that holds several locks.
//
// The events a client reports to an Observer (WithObserver) are the
// package observe, as net/http/httptrace is beside net/http: who
// implements an Observer (a metrics or tracing adapter such as s3lockotel)
// needs their vocabulary, and a lock's holder or waiter does not.
//
// Everything else a lock's holder or waiter uses stays in this one package.
//
// # Where the rules are
//
// errors.go holds the error vocabulary and classify.go what an S3 error
// means for the protocol; store.go makes every S3 request (one per-request
// timeout, one wrapping), and listing.go holds every paged listing to the
// rule that it makes progress or fails; timing.go holds every timing, retry
// and backoff number with its reason, and the trust window (trust) that a
// lease and a waiter's ticket both keep; names.go the rules for names,
// prefixes and keys; options.go the options and their limits; payload.go
// the bodies written (an epoch object's, a ticket's); settle.go the one
// conditional write whose answer may be lost (write, classify, read back,
// settle), through which the lease, the acquisition and the line write. The
// protocol itself is in acquire.go (a mutex's attempt), wait.go (waiting: the
// loop, and a mutex's wait for its holder), slots.go (a slot lock, a type of
// its own), line.go and line_wait.go (the line of ordered waiters, the same
// for both), watch.go (Watch), lease.go
// (renewal, release, the trust deadline), resume.go (takeover and Lookup),
// cleanup.go and discover.go (bounded history), current.go (reading
// state); subpackages.go is this package's side of the bridge
// (internal/bridge) through which fence and storecheck make their requests.
package s3lock
