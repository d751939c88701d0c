package s3lock_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// A versioned bucket (PROTOCOL.md §2): every write of an epoch object keeps
// the previous version, which costs storage, and changes nothing else.

// lockLife is what one life of a lock looked like: the states read at each
// step and the requests it took.
type lockLife struct {
	Steps    []string
	Requests string
}

// liveALock acquires a lock, renews it 100 times, releases it, hands it to
// a second holder that an operator force-releases, and lets a third take it.
func liveALock(t *testing.T, ns *s3test.Namespace, counter *s3test.Counter) lockLife {
	t.Helper()
	ctx := t.Context()
	name := ns.Name("versioned/lock")
	c := newLockClient(t, ns, "a", nil)
	var life lockLife
	step := func(format string, args ...any) { life.Steps = append(life.Steps, fmt.Sprintf(format, args...)) }
	state := func(what string) {
		st, err := c.Current(ctx, name)
		step("%s: phase %s, epoch %d, renewals %d, holder %q, err %v", what, st.Phase(), st.Epoch, st.Renewals, st.Holder, err)
	}
	counter.Reset()
	l, err := c.TryAcquire(ctx, name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	step("acquired epoch %d", l.Token().Epoch)
	for i := range 100 {
		if err := l.Renew(ctx); err != nil {
			t.Fatalf("renewal %d: %v", i+1, err)
		}
	}
	state("after 100 renewals")
	_, err = c.TryAcquire(ctx, name)
	step("a contender: held %v", errors.Is(err, s3lock.ErrHeld))
	step("release: %v", l.Release(ctx))
	state("released")
	l2, err := c.TryAcquire(ctx, name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	step("acquired epoch %d", l2.Token().Epoch)
	step("force-release: %v", c.ForceRelease(ctx, s3lock.Token{Name: name, Epoch: l2.Token().Epoch}))
	var lost *s3lock.LeaseLostError
	if err := l2.Renew(ctx); errors.As(err, &lost) {
		step("renewal after the force-release: lost, %s", lost.Reason)
	} else {
		step("renewal after the force-release: %v", err)
	}
	l3, err := c.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	step("acquired epoch %d", l3.Token().Epoch)
	step("release: %v", l3.Release(ctx))
	state("end")
	life.Requests = counter.String()
	return life
}

// TestVersionedBucket_LockBehavesAsOnAnUnversionedOne: the same life of a
// lock, 100 renewals included, reads the same states and makes the same
// requests on a versioned bucket as on an unversioned one; the versioned
// bucket keeps every write of the epoch object as a version (the cost
// PROTOCOL.md §2 documents).
func TestVersionedBucket_LockBehavesAsOnAnUnversionedOne(t *testing.T) {
	t.Parallel()
	if s3test.External() {
		t.Skip("needs a versitygw server of its own, with versioning")
	}
	plainCount, plainOpt := counting()
	plain := liveALock(t, s3test.New(t, plainOpt), plainCount)
	versionedCount, versionedOpt := counting()
	vns := s3test.NewVersioned(t, versionedOpt)
	versioned := liveALock(t, vns, versionedCount)
	if !reflect.DeepEqual(plain, versioned) {
		t.Errorf("the lock lived differently on a versioned bucket:\nunversioned: %+v\nversioned:   %+v", plain, versioned)
	}
	t.Logf("requests: %s", versioned.Requests)
	out, err := vns.Client.ListObjectVersions(t.Context(), &s3.ListObjectVersionsInput{
		Bucket: aws.String(vns.Bucket), Prefix: aws.String(s3lock.Token{Name: vns.Name("versioned/lock"), Epoch: 1}.Key()),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The create, 100 renewals and the release.
	if got := len(out.Versions); got != 102 {
		t.Errorf("epoch 1 has %d versions; want 102 (every write of it kept)", got)
	}
}
