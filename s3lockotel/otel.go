// Package s3lockotel reports what an s3lock client does as OpenTelemetry
// metrics, and optionally spans. It is its own module, so users of package
// s3lock who do not want OpenTelemetry never fetch it:
//
//	obs, err := s3lockotel.New() // the global MeterProvider; see the options
//	if err != nil { ... }
//	locks, err := s3lock.New(api, "my-locks", s3lock.WithObserver(obs))
//
// Metrics (attributes in brackets):
//
//	s3lock.acquisitions      counter    acquisitions ended [s3lock.bucket, s3lock.lock, s3lock.outcome, error.type, s3lock.call: acquire, try]
//	s3lock.acquire.wait      histogram  seconds an Acquire (not TryAcquire) ran before it acquired or gave up [same]
//	s3lock.renewals          counter    renewals [s3lock.bucket, s3lock.lock, s3lock.outcome: ok, failed]
//	s3lock.leases.lost       counter    leases lost [s3lock.bucket, s3lock.lock, s3lock.loss_reason]
//	s3lock.releases          counter    leases released [s3lock.bucket, s3lock.lock]
//	s3lock.requests          counter    S3 requests [s3lock.bucket, s3.operation, s3lock.outcome]
//	s3lock.request.duration  histogram  seconds per S3 request [same]
//
// s3lock.outcome for requests is the observe.Event's Outcome (ok,
// not-modified, precondition-failed, ...): a waiter's polls of a held lock
// are not-modified, a create that lost a race precondition-failed — normal
// answers, not errors; a request span has an error status only for the
// failures (unavailable, denied, error). Lock names can be many: WithoutLockNames leaves them
// out.
//
// With WithTracerProvider, every Acquire is a span "s3lock.acquire" from the
// start of its wait to its end, and every S3 request a client span
// "S3 <operation>"; the spans have no parent (the observer hears events, not
// contexts).
package s3lockotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/s3lock/terraform-provider-s3lock/s3lockotel"

// The histograms' bucket boundaries, in seconds: requests from a few
// milliseconds to the SDK's request timeout (OpenTelemetry's HTTP
// convention), waits from a free lock to an hour behind a long apply.
var (
	requestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30}
	waitBuckets    = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
)

var _ observe.Observer = (*Observer)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	meters    metric.MeterProvider
	tracers   trace.TracerProvider
	lockNames bool
}

// WithMeterProvider records the metrics with mp instead of the global
// MeterProvider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meters = mp }
}

// WithTracerProvider records spans with tp; without it there are no spans.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracers = tp }
}

// WithoutLockNames leaves the s3lock.lock attribute out, for a process that
// takes many distinct locks (each name is a time series).
func WithoutLockNames() Option {
	return func(c *config) { c.lockNames = false }
}

// Observer is an observe.Observer that records events as OpenTelemetry
// metrics and spans. It is safe for concurrent use.
type Observer struct {
	lockNames bool
	tracer    trace.Tracer // nil: no spans

	acquisitions, renewals, lost, releases, requests metric.Int64Counter
	wait, requestDuration                            metric.Float64Histogram
}

// New returns an Observer for s3lock.WithObserver.
func New(opts ...Option) (*Observer, error) {
	cfg := config{meters: otel.GetMeterProvider(), lockNames: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.meters == nil {
		return nil, errors.New("s3lockotel: WithMeterProvider needs a MeterProvider")
	}
	m := cfg.meters.Meter(ScopeName)
	o := &Observer{lockNames: cfg.lockNames}
	if cfg.tracers != nil {
		o.tracer = cfg.tracers.Tracer(ScopeName)
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string, bounds []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	o.acquisitions = counter("s3lock.acquisitions", "{acquisition}", "Acquisitions of s3lock locks that ended, by outcome.")
	o.wait = seconds("s3lock.acquire.wait", "How long an Acquire ran before it acquired the lock or gave up.", waitBuckets)
	o.renewals = counter("s3lock.renewals", "{renewal}", "Renewals of s3lock leases, confirmed or failed.")
	o.lost = counter("s3lock.leases.lost", "{lease}", "s3lock leases that ended without being released, by reason.")
	o.releases = counter("s3lock.releases", "{lease}", "s3lock leases released.")
	o.requests = counter("s3lock.requests", "{request}", "S3 requests made by s3lock, by operation and outcome.")
	o.requestDuration = seconds("s3lock.request.duration", "How long each S3 request of s3lock took.", requestBuckets)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("s3lockotel: creating instruments: %w", err)
	}
	return o, nil
}

// Observe records one event; it implements observe.Observer.
func (o *Observer) Observe(e observe.Event) {
	ctx := context.Background()
	switch e.Kind {
	case observe.Acquired, observe.AcquireFailed:
		attrs := o.lockAttrs(e, attribute.String("s3lock.outcome", acquireOutcome(e)))
		if e.Err != nil {
			attrs = append(attrs, attribute.String("error.type", errorType(e.Err)))
		}
		call := "acquire"
		if e.Try {
			call = "try"
		}
		attrs = append(attrs, attribute.String("s3lock.call", call))
		set := metric.WithAttributes(attrs...)
		o.acquisitions.Add(ctx, 1, set)
		if !e.Try { // a TryAcquire does not wait: its zeros would skew the waits
			o.wait.Record(ctx, e.Wait.Seconds(), set)
			o.span("s3lock.acquire", trace.SpanKindInternal, e.Wait, e.Err, attrs)
		}
	case observe.Renewed, observe.RenewFailed:
		outcome := "ok"
		if e.Kind == observe.RenewFailed {
			outcome = "failed"
		}
		o.renewals.Add(ctx, 1, metric.WithAttributes(o.lockAttrs(e, attribute.String("s3lock.outcome", outcome))...))
	case observe.Lost:
		o.lost.Add(ctx, 1, metric.WithAttributes(o.lockAttrs(e, attribute.String("s3lock.loss_reason", e.Reason))...))
	case observe.Released:
		o.releases.Add(ctx, 1, metric.WithAttributes(o.lockAttrs(e)...))
	case observe.Request:
		attrs := []attribute.KeyValue{attribute.String("s3lock.bucket", e.Bucket), attribute.String("s3.operation", e.Op),
			attribute.String("s3lock.outcome", e.Outcome)}
		set := metric.WithAttributes(attrs...)
		o.requests.Add(ctx, 1, set)
		o.requestDuration.Record(ctx, e.Duration.Seconds(), set)
		var err error
		if requestFailed(e.Outcome) {
			err = errors.New(e.Outcome)
		}
		o.span("S3 "+e.Op, trace.SpanKindClient, e.Duration, err, append(attrs, attribute.String("s3.key", e.Key)))
	}
}

// lockAttrs are the attributes naming the bucket and (unless left out) the
// lock of e, followed by more.
func (o *Observer) lockAttrs(e observe.Event, more ...attribute.KeyValue) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("s3lock.bucket", e.Bucket)}
	if o.lockNames {
		attrs = append(attrs, attribute.String("s3lock.lock", e.Lock))
	}
	return append(attrs, more...)
}

// span records a span that ended now and lasted d, if spans are on.
func (o *Observer) span(name string, kind trace.SpanKind, d time.Duration, err error, attrs []attribute.KeyValue) {
	if o.tracer == nil {
		return
	}
	end := time.Now()
	_, sp := o.tracer.Start(context.Background(), name, trace.WithTimestamp(end.Add(-d)), trace.WithSpanKind(kind),
		trace.WithAttributes(attrs...))
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(trace.WithTimestamp(end))
}

// requestFailed reports whether a request's Outcome is a failure, as
// observe.Event documents them: "unavailable", "denied" and "error". The other
// outcomes are answers the protocol expects.
func requestFailed(outcome string) bool {
	switch outcome {
	case "unavailable", "denied", "error":
		return true
	}
	return false
}

func acquireOutcome(e observe.Event) string {
	if e.Kind == observe.Acquired {
		return "acquired"
	}
	return "failed"
}

// errorType names why an acquisition failed, coarsely (one time series
// each): superseded, timeout, canceled, held, unavailable, denied,
// no_such_bucket, invalid, or other.
func errorType(err error) string {
	switch {
	case errors.Is(err, s3lock.ErrSuperseded):
		return "superseded"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, s3lock.ErrHeld):
		return "held"
	case errors.Is(err, s3lock.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, s3lock.ErrAccessDenied):
		return "denied"
	case errors.Is(err, s3lock.ErrNoSuchBucket):
		return "no_such_bucket"
	case errors.Is(err, s3lock.ErrInvalidName), errors.Is(err, s3lock.ErrInvalidConfig):
		return "invalid"
	}
	return "other"
}
