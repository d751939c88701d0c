package provider

import "time"

// The provider's durations, retry counts and bounds, each with its reason.
// The protocol's own timing (renewal, backoff, safety margins) is the SDK's.
const (
	// defaultMaxRetries is how often a failed S3 request is retried by the
	// AWS SDK: two retries (three attempts) is the SDK's own default, and
	// keeps an unreachable endpoint from stalling a plan for long.
	defaultMaxRetries = 2
	// maxMaxRetries bounds max_retries: beyond it a dead endpoint holds a
	// plan for minutes, with maxRetryBackoff between attempts.
	maxMaxRetries = 25
	// maxRetryBackoff caps the AWS SDK's backoff between two attempts.
	maxRetryBackoff = 5 * time.Second

	// defaultResourceLeaseDuration is how long a lease resource stays valid
	// between applies. Nothing renews it in between (the provider process
	// ends with each Terraform run), so it must outlast the gap between the
	// steps that use it; an hour covers a typical pipeline.
	defaultResourceLeaseDuration = "1h"
	// defaultCreateTimeout is how long Create waits for a held lock.
	defaultCreateTimeout = 5 * time.Minute
	// minRenewBefore is the shortest renew_before: expires_at has
	// one-second resolution.
	minRenewBefore = time.Second

	// defaultEphemeralLeaseDuration bounds how long a killed Terraform run
	// keeps others waiting; while the run lasts, the lease is renewed every
	// third of it (the SDK's renew interval).
	defaultEphemeralLeaseDuration = "2m"
	// defaultWaitTimeout is how long Open waits for a held lock.
	defaultWaitTimeout = "5m"
	// minWaitTimeout is the shortest wait_timeout other than "0s" (try
	// once): a shorter one is almost always a mistyped unit.
	minWaitTimeout = time.Second
	// maxWaitTimeout bounds wait_timeout: a day is longer than any run
	// should wait for another.
	maxWaitTimeout = 24 * time.Hour
	// readTimeout bounds each read of the store (a data source's or a
	// resource's Read, a list of leases): a few requests for a lease, about
	// one per lock for a prefix (eight at a time); two minutes are far more
	// than a store that answers needs, and a store that does not (or whose
	// listing would not end) fails the plan instead of holding it.
	readTimeout = 2 * time.Minute
	// maxMaxHold bounds max_hold, a lease's cap on its tenure: a year is
	// longer than any run, pipeline or change window a cap is meant to
	// bound; a longer one is a typo for something shorter, or no cap.
	maxMaxHold = 366 * 24 * time.Hour
	// renewAtDivisor places Terraform's Renew of an ephemeral lease a third
	// of the way to its expiry, leaving two thirds of the lease to retry in.
	renewAtDivisor = 3
)
