package s3lockotel_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
	"github.com/s3lock/terraform-provider-s3lock/s3lockotel"
)

// The tests run against the repository's local S3 server (versitygw).
func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// metrics collects what the reader holds, by instrument name.
func metrics(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != s3lockotel.ScopeName {
			t.Errorf("scope %q; want %q", sm.Scope.Name, s3lockotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum adds the points of a counter whose attributes include every one of
// want.
func sum(t *testing.T, data metricdata.Aggregation, want ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%T is not an int64 sum", data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// A known scenario: acquire a free lock, fail to take it again, renew,
// release; wait about 300 ms for another holder, then lose the lease to a
// force-release.
func TestObserver_RecordsAKnownScenario(t *testing.T) {
	ns := s3test.New(t)
	name := ns.Name("metered")
	obs, reader, spans := newRecordingObserver(t)
	c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("metered"), s3lock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	other, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("other"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	l, err := c.TryAcquire(ctx, name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, name); !errors.Is(err, s3lock.ErrHeld) {
		t.Fatalf("TryAcquire of a held lock = %v; want ErrHeld", err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := other.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, func() { _ = held.Release(context.Background()) })
	l2, err := c.Acquire(ctx, name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := other.ForceRelease(ctx, s3lock.Token{Name: name, Epoch: l2.Token().Epoch}); err != nil {
		t.Fatal(err)
	}
	if err := l2.Renew(ctx); !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Renew after a force-release = %v; want ErrLeaseLost", err)
	}

	m := metrics(t, reader)
	bucket, lock := attribute.String("s3lock.bucket", ns.Bucket), attribute.String("s3lock.lock", name)
	for _, want := range []struct {
		metric string
		attrs  []attribute.KeyValue
		n      int64
	}{
		{"s3lock.acquisitions", []attribute.KeyValue{bucket, lock, attribute.String("s3lock.outcome", "acquired")}, 2},
		{"s3lock.acquisitions", []attribute.KeyValue{bucket, lock, attribute.String("s3lock.outcome", "failed"),
			attribute.String("error.type", "held")}, 1},
		{"s3lock.renewals", []attribute.KeyValue{bucket, lock, attribute.String("s3lock.outcome", "ok")}, 1},
		{"s3lock.renewals", []attribute.KeyValue{attribute.String("s3lock.outcome", "failed")}, 0},
		{"s3lock.releases", []attribute.KeyValue{bucket, lock}, 1},
		{"s3lock.leases.lost", []attribute.KeyValue{bucket, lock, attribute.String("s3lock.loss_reason", "force-released")}, 1},
		// The renewal after the force-release: If-Match refused.
		{"s3lock.requests", []attribute.KeyValue{bucket, attribute.String("s3.operation", "PutObject"),
			attribute.String("s3lock.outcome", "precondition-failed")}, 1},
		// Creates of epochs 1 and 3, the renewal, the release.
		{"s3lock.requests", []attribute.KeyValue{attribute.String("s3.operation", "PutObject"),
			attribute.String("s3lock.outcome", "ok")}, 4},
	} {
		if got := sum(t, m[want.metric], want.attrs...); got != want.n {
			t.Errorf("%s %v = %d; want %d", want.metric, want.attrs, got, want.n)
		}
	}
	// The wait histogram: the one Acquire (the TryAcquires do not wait), which
	// waited ~300 ms.
	h, ok := m["s3lock.acquire.wait"].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("s3lock.acquire.wait is %T; want a float64 histogram", m["s3lock.acquire.wait"])
	}
	var count uint64
	var total float64
	for _, p := range h.DataPoints {
		count += p.Count
		total += p.Sum
	}
	if count != 1 || total < 0.25 {
		t.Errorf("s3lock.acquire.wait: %d acquisitions, %.3f s in all; want 1, at least 0.25 s", count, total)
	}
	if got := sum(t, m["s3lock.acquisitions"], attribute.String("s3lock.call", "try")); got != 2 {
		t.Errorf("TryAcquire acquisitions: %d; want 2", got)
	}
	// Spans: one per acquisition, one per request.
	var acquireSpans, requestSpans int
	for _, s := range spans.Ended() {
		switch {
		case s.Name() == "s3lock.acquire":
			acquireSpans++
		case len(s.Name()) > 3 && s.Name()[:3] == "S3 ":
			requestSpans++
		}
	}
	if acquireSpans != 1 || requestSpans != int(sum(t, m["s3lock.requests"])) {
		t.Errorf("spans: %d acquisitions, %d requests; want 1 (the Acquire) and one per request (%d)",
			acquireSpans, requestSpans, sum(t, m["s3lock.requests"]))
	}
}

func TestObserver_WithoutLockNames(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs, err := s3lockotel.New(s3lockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		s3lockotel.WithoutLockNames())
	if err != nil {
		t.Fatal(err)
	}
	obs.Observe(observe.Event{Kind: observe.Released, Bucket: "b", Lock: "deploy/prod"})
	s := metrics(t, reader)["s3lock.releases"].(metricdata.Sum[int64])
	if len(s.DataPoints) != 1 {
		t.Fatalf("releases: %+v", s.DataPoints)
	}
	if _, ok := s.DataPoints[0].Attributes.Value("s3lock.lock"); ok {
		t.Errorf("the lock name was recorded: %v", s.DataPoints[0].Attributes)
	}
}

// The attribute values of events, as dashboards match them: a lost lease's
// reason is its word ("replaced" for a newer epoch), and a request span has
// an error status only for the failing outcomes (unavailable, denied, error),
// not for the answers the protocol expects.
func TestObserver_EventValues(t *testing.T) {
	obs, reader, spans := newRecordingObserver(t)
	reasons := map[s3lock.LossReason]string{
		s3lock.LostLapsed: "lapsed", s3lock.LostReplaced: "replaced", s3lock.LostForceReleased: "force-released",
		s3lock.LostReleased: "released", s3lock.LostTakenOver: "taken over", s3lock.LostDeleted: "deleted",
		s3lock.LostNotThisLease: "not this lease",
	}
	for r := range reasons {
		obs.Observe(observe.Event{Kind: observe.Lost, Bucket: "b", Lock: "deploy", Reason: string(r)})
	}
	failed := map[string]bool{
		"ok": false, "not-modified": false, "precondition-failed": false, "not-found": false, "conflict": false, "canceled": false,
		"unavailable": true, "denied": true, "error": true,
	}
	for outcome := range failed {
		obs.Observe(observe.Event{Kind: observe.Request, Bucket: "b", Op: "Op-" + outcome, Outcome: outcome, Key: "k"})
	}

	m := metrics(t, reader)
	for r, word := range reasons {
		if got := sum(t, m["s3lock.leases.lost"], attribute.String("s3lock.loss_reason", word)); got != 1 {
			t.Errorf("leases lost as %q (%s): %d; want 1", word, r, got)
		}
	}
	for outcome := range failed {
		if got := sum(t, m["s3lock.requests"], attribute.String("s3lock.outcome", outcome)); got != 1 {
			t.Errorf("requests with outcome %q: %d; want 1", outcome, got)
		}
	}
	seen := 0
	for _, sp := range spans.Ended() {
		outcome, ok := strings.CutPrefix(sp.Name(), "S3 Op-")
		if !ok {
			continue
		}
		seen++
		if isErr := sp.Status().Code == codes.Error; isErr != failed[outcome] {
			t.Errorf("span of a request with outcome %q: status %v; want an error status: %v", outcome, sp.Status(), failed[outcome])
		}
	}
	if seen != len(failed) {
		t.Errorf("%d request spans; want %d", seen, len(failed))
	}
}

// newRecordingObserver returns an observer whose metrics reader collects on
// demand and whose spans are recorded.
func newRecordingObserver(t *testing.T) (*s3lockotel.Observer, *sdkmetric.ManualReader, *tracetest.SpanRecorder) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	obs, err := s3lockotel.New(
		s3lockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		s3lockotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))))
	if err != nil {
		t.Fatal(err)
	}
	return obs, reader, spans
}
