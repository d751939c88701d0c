package s3lock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// TestSizeCode_ListingNeverFreesALiveLease: what a listing's size says of an
// epoch object agrees with §6's rule on the object itself. For leases of
// validities across every class, released or not, and ages around their
// lapse: a released one is free; one that §6 still calls held (younger than
// its validity plus serverSlack) is never judged free from its size; one
// judged held is held by §6 too; and one older than its class's bound plus
// serverSlack is free without a read. Every body keeps its payload and size
// code through padding.
func TestSizeCode_ListingNeverFreesALiveLease(t *testing.T) {
	date := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	validities := []time.Duration{2 * time.Second, 3 * time.Second, 3200 * time.Millisecond, 3201 * time.Millisecond,
		13 * time.Second, 25600 * time.Millisecond, time.Minute, 2 * time.Minute, time.Hour, 30 * 24 * time.Hour}
	for _, v := range validities {
		for _, released := range []bool{false, true} {
			p := payload{owner: owner{Holder: "h", ValidityMs: v.Milliseconds()}, Format: formatVersion, Epoch: 7, Nonce: "n",
				Write: "w", Released: released, AcquiredAt: date}
			body, err := p.encode()
			if err != nil {
				t.Fatal(err)
			}
			if back, err := parsePayload(body, 7); err != nil || back.Released != released || back.validity() != v {
				t.Fatalf("the padded body of %+v reads back as %+v, %v", p, back, err)
			}
			bound := validityUnit << validityClass(v)
			if bound < v || bound >= 2*v && v > validityUnit {
				t.Fatalf("validity %s: class bound %s is not in [v, 2v)", v, bound)
			}
			ages := []time.Duration{0, v / 3, bound/2 - time.Millisecond, v, v + serverSlack - time.Millisecond,
				v + serverSlack, bound + serverSlack - time.Millisecond, bound + serverSlack, 3 * bound}
			for _, age := range ages {
				e := listedEpoch{key: "k", epoch: 7, etag: `"e"`, lastModified: date.Add(-age), size: int64(len(body))}
				verdict, _ := judgeListed(e, date)
				lapsed := released || age >= v+serverSlack // §6, on the object itself
				what := fmt.Sprintf("validity %s, released %v, age %s (size %d)", v, released, age, len(body))
				switch {
				case verdict == sizeFree && !lapsed:
					t.Errorf("%s: judged free from the listing, but §6 calls it held", what)
				case verdict == sizeHeld && lapsed:
					t.Errorf("%s: judged held from the listing, but §6 calls it free", what)
				case released && verdict != sizeFree:
					t.Errorf("%s: a released lease not judged free from its size", what)
				case age >= bound+serverSlack && verdict != sizeFree:
					t.Errorf("%s: older than its class's bound plus slack, yet not judged free", what)
				}
			}
		}
	}
	// A marker (no validity) and an object of no size are never judged.
	marker := payload{owner: owner{Holder: "h"}, Format: markerFormat, Epoch: 1, Slots: 3}
	body, err := marker.encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{int64(len(body)), 0} {
		if v, _ := judgeListed(listedEpoch{size: size, lastModified: date.Add(-time.Hour)}, date); v != sizeUnknown {
			t.Errorf("an object of size %d judged %d from the listing; want unknown", size, v)
		}
	}
}

// TestSlots_AnOldMarkersSlotsAreRead: under a marker written before size
// codes (format 2), the slots' sizes say nothing, and each slot is read
// (one GET each) instead of judged from the listing: a full lock is still
// reported held, a released slot still taken.
func TestSlots_AnOldMarkersSlotsAreRead(t *testing.T) {
	t.Parallel()
	counter := &s3test.Counter{}
	ns := s3test.New(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return counter.Wrap(next) }))
	name := ns.Name("old-pool")
	const n = 4
	marker := payload{owner: owner{Holder: "old"}, Format: oldMarkerFormat, Epoch: 1, Nonce: "n", Write: "w", Slots: n}
	body, err := json.Marshal(marker) // as an s3lock before size codes wrote it: no padding
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(epochKey(name, 1)),
		Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	holders, err := New(ns.Client, ns.Bucket, WithHolder("holders"))
	if err != nil {
		t.Fatal(err)
	}
	var leases []*Lease
	for range n {
		l, err := holders.TryAcquire(t.Context(), name, WithSlots(n))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	defer func() {
		for _, l := range leases {
			_ = l.Release(context.Background())
		}
	}()
	cold, err := New(ns.Client, ns.Bucket, WithHolder("cold"))
	if err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	_, err = cold.TryAcquire(t.Context(), name, WithSlots(n))
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("TryAcquire of a full lock under an old marker = %v; want a *HeldError", err)
	}
	if got, want := counter.Count("GetObject"), 1+n; got != want {
		t.Errorf("TryAcquire under an old marker made %s; want %d GETs (the marker's, and each slot's)", counter, want)
	}
}
