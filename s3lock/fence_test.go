package s3lock_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestFencedPut_StaleLeaseCannotOverwrite: a holder that paused past the
// end of its lease cannot overwrite what the next holder wrote.
func TestFencedPut_StaleLeaseCannotOverwrite(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("fenced")
	target := ns.Name("protected/state.json")
	a := newLockClient(t, ns, "paused", []s3lock.Option{s3lock.WithLeaseDuration(2 * time.Second)})
	b := newLockClient(t, ns, "next", []s3lock.Option{s3lock.WithPollInterval(50 * time.Millisecond)})
	put := func(epoch uint64, body string) error {
		_, err := s3lock.FencedPut(t.Context(), ns.Client, epoch, &s3.PutObjectInput{
			Bucket: aws.String(ns.Bucket), Key: aws.String(target), Body: strings.NewReader(body),
			Metadata: map[string]string{"writer": body},
		})
		return err
	}
	read := func() (string, string) {
		out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(target)})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		return string(b), out.Metadata[s3lock.FenceMetadataKey]
	}

	la, err := a.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := put(la.Epoch(), "a-before-pause"); err != nil {
		t.Fatalf("fenced write under a valid lease: %v", err)
	}
	// a pauses; its lease lapses and b takes over.
	lb, err := b.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	mustRelease(t, lb)
	if err := put(lb.Epoch(), "b"); err != nil {
		t.Fatalf("fenced write by the new holder: %v", err)
	}
	// a wakes up and writes with its old epoch.
	err = put(la.Epoch(), "a-after-pause")
	var fe *s3lock.FencedError
	if !errors.Is(err, s3lock.ErrStaleEpoch) || !errors.As(err, &fe) || fe.Current != lb.Epoch() || fe.Epoch != la.Epoch() {
		t.Fatalf("stale fenced write = %v; want a FencedError (epoch %d < %d)", err, la.Epoch(), lb.Epoch())
	}
	if body, epoch := read(); body != "b" || epoch != "2" {
		t.Errorf("object = %q written under epoch %s; want b's write under epoch 2", body, epoch)
	}
	// The same epoch may write again.
	if err := put(lb.Epoch(), "b-again"); err != nil {
		t.Errorf("second write by the same epoch: %v", err)
	}
}
