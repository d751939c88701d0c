package storecheck_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/observe"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

func TestMain(m *testing.M) { os.Exit(s3test.MainCheckingLeaks(m)) }

// ignoringStore is a store that accepts conditional headers and ignores
// them, like some S3-compatible servers: it drops them before they are
// signed and sent to the real server.
type ignoringStore struct {
	s3lock.S3API
	dropIfNoneMatch, dropIfMatch bool
}

func (s ignoringStore) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	cp := *in
	if s.dropIfNoneMatch {
		cp.IfNoneMatch = nil
	}
	if s.dropIfMatch {
		cp.IfMatch = nil
	}
	return s.S3API.PutObject(ctx, &cp, opts...)
}

// sizeSkewing lists every object as add bytes larger than it is.
type sizeSkewing struct {
	s3lock.S3API
	add int64
}

func (s sizeSkewing) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	out, err := s.S3API.ListObjectsV2(ctx, in, opts...)
	if err == nil {
		for i := range out.Contents {
			out.Contents[i].Size = aws.Int64(aws.ToInt64(out.Contents[i].Size) + s.add)
		}
	}
	return out, err
}

func TestVerify(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	unordered := s3test.UnorderedListings{Client: ns.Client}
	cases := []struct {
		name string
		api  s3lock.S3API
		want error // nil: Verify passes
	}{
		{"real store", ns.Client, nil},
		{"store ignoring If-None-Match", ignoringStore{S3API: ns.Client, dropIfNoneMatch: true}, s3lock.ErrConditionalWritesUnsupported},
		{"store ignoring If-Match", ignoringStore{S3API: ns.Client, dropIfMatch: true}, s3lock.ErrConditionalWritesUnsupported},
		{"store ignoring both", ignoringStore{S3API: ns.Client, dropIfNoneMatch: true, dropIfMatch: true}, s3lock.ErrConditionalWritesUnsupported},
		// As an S3 directory bucket lists.
		{"store listing out of order", unordered, s3lock.ErrUnorderedListing},
		// As a store that lists the size it stores (encrypted) would.
		{"store listing other sizes", sizeSkewing{S3API: ns.Client, add: 32}, s3lock.ErrUnorderedListing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.api == unordered && ns.Target.Directory {
				t.Skip("a directory bucket lists out of order, and s3lock lists it whole: TestDirectoryBuckets_VerifyReportsTheListingOrder")
			}
			c, err := s3lock.New(tc.api, ns.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			err = storecheck.Verify(t.Context(), c, ns.Prefix)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("Verify = %v; want nil", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("Verify = %v; want %v", err, tc.want)
			}
			if keys := s3test.Keys(t, ns.Client, ns.Bucket, ns.Name("s3lock-probe/")); len(keys) != 0 {
				t.Errorf("Verify left probe objects behind: %v", keys)
			}
		})
	}
}

// TestRun_ReportsTheProbeAndEachPermission: Run reports the
// conditional-write probe and the list, get, put and delete permissions as
// the store answered them, leaves no probe objects, and classifies denied
// credentials as the rest of the package does.
func TestRun_ReportsTheProbeAndEachPermission(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	probe := ns.Name("s3lock-probe/")
	check := func(t *testing.T, api s3lock.S3API) storecheck.Report {
		t.Helper()
		c, err := s3lock.New(api, ns.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := storecheck.Run(t.Context(), c, ns.Prefix)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if rep.Bucket != ns.Bucket || rep.ProbePrefix != probe || len(rep.Checks) != 6 {
			t.Fatalf("report = %+v; want six checks of bucket %s under %s", rep, ns.Bucket, probe)
		}
		return rep
	}
	statuses := func(rep storecheck.Report) map[string]storecheck.Status {
		m := map[string]storecheck.Status{}
		for _, c := range rep.Checks {
			m[c.Name] = c.Status
		}
		return m
	}

	t.Run("real store", func(t *testing.T) {
		rep := check(t, ns.Client)
		if !rep.OK {
			t.Errorf("report of the real store = %+v; want every check ok", rep)
		}
		perms := map[string]string{}
		for _, c := range rep.Checks {
			perms[c.Name] = c.Permission
		}
		if perms["list"] != "s3:ListBucket" || perms["delete"] != "s3:DeleteObject" || perms["conditional writes"] != "" {
			t.Errorf("permissions = %v", perms)
		}
		if st, err := s3lock.New(ns.Client, ns.Bucket); err != nil {
			t.Fatal(err)
		} else if locks, err := st.List(t.Context(), ns.Prefix); err != nil || len(locks) != 0 {
			t.Errorf("List after Run = %v, %v; want the probe lock hidden", locks, err)
		}
	})
	t.Run("store ignoring If-None-Match", func(t *testing.T) {
		rep := check(t, ignoringStore{S3API: ns.Client, dropIfNoneMatch: true})
		c := rep.Checks[0]
		if rep.OK || c.Status != storecheck.StatusFailed || !errors.Is(c.Err, s3lock.ErrConditionalWritesUnsupported) {
			t.Errorf("conditional-write check = %+v; want failed with ErrConditionalWritesUnsupported", c)
		}
	})
	t.Run("store listing out of order", func(t *testing.T) {
		if ns.Target.Directory {
			t.Skip("a directory bucket lists out of order, and s3lock lists it whole: TestDirectoryBuckets_VerifyReportsTheListingOrder")
		}
		rep := check(t, s3test.UnorderedListings{Client: ns.Client})
		want := map[string]storecheck.Status{"conditional writes": storecheck.StatusOK, "listing order": storecheck.StatusFailed,
			"list": storecheck.StatusOK, "get": storecheck.StatusOK, "put": storecheck.StatusOK, "delete": storecheck.StatusOK}
		if got := statuses(rep); rep.OK || !maps.Equal(got, want) || !errors.Is(rep.Checks[1].Err, s3lock.ErrUnorderedListing) {
			t.Errorf("statuses of a store listing out of order = %v (%+v); want %v, listing order failed with ErrUnorderedListing", got, rep.Checks[1], want)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		if !ns.Target.Local {
			t.Skip("needs the local server's credentials")
		}
		tg := ns.Target
		tg.SecretKey = "wrong-secret"
		rep := check(t, s3test.NewClient(t, tg))
		want := map[string]storecheck.Status{"conditional writes": storecheck.StatusError, "listing order": storecheck.StatusNotChecked, "list": storecheck.StatusDenied,
			"get": storecheck.StatusNotChecked, "put": storecheck.StatusDenied, "delete": storecheck.StatusNotChecked}
		if got := statuses(rep); !maps.Equal(got, want) {
			t.Errorf("statuses with a wrong secret = %v; want %v (%+v)", got, want, rep.Checks)
		}
		if err := rep.Checks[2].Err; !errors.Is(err, s3lock.ErrAccessDenied) {
			t.Errorf("list check's error = %v; want ErrAccessDenied", err)
		}
	})
	if keys := s3test.Keys(t, ns.Client, ns.Bucket, probe+"probe-"); len(keys) != 0 {
		t.Errorf("Run left probe objects behind: %v", keys)
	}
}

// TestVerify_ProbesUnderAnObjectAreANameCollision: probes under a prefix
// that an object's name blocks ("deploy" beside the probe prefix
// "deploy/s3lock-probe/") fail Verify with ErrNameCollision, never as a
// store outage or as a store without conditional writes — on a store that
// cannot keep both (versitygw). Stores that keep both pass.
func TestVerify_ProbesUnderAnObjectAreANameCollision(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(ns.Name("deploy")),
		Body: strings.NewReader("an object, not a lock")}); err != nil {
		t.Fatal(err)
	}
	c, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	err = storecheck.Verify(t.Context(), c, ns.Name("deploy/"))
	if err == nil {
		t.Skip("this store keeps keys under an object's name, as S3 does: nothing collides")
	}
	if !errors.Is(err, s3lock.ErrNameCollision) || errors.Is(err, s3lock.ErrUnavailable) || errors.Is(err, s3lock.ErrConditionalWritesUnsupported) {
		t.Errorf("Verify with probes under an object = %v; want ErrNameCollision alone", err)
	}
}

// TestRun_MissingBucketSaysSo: against a bucket that does not exist
// the report says so (NoSuchBucket), so that no face counts the checks that
// never ran as failures ("6 of 6 checks did not pass", issue 36); a bucket
// that exists does not set it.
func TestRun_MissingBucketSaysSo(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	absent := "no-such-bucket-" + s3test.RandomHex(4)
	if ns.Target.Directory {
		absent += s3test.DirectoryBucketSuffix
	}
	for bucket, want := range map[string]bool{absent: true, ns.Bucket: false} {
		c, err := s3lock.New(ns.Client, bucket)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := storecheck.Run(t.Context(), c, ns.Prefix)
		if err != nil || rep.NoSuchBucket != want || (want && rep.OK) {
			t.Errorf("Run of %s = %+v, %v; want NoSuchBucket %v", bucket, rep, err, want)
		}
	}
}

// TestDirectoryBuckets_VerifyReportsTheListingOrder: Verify and Run
// pass a directory bucket, saying that it lists in no key order and that
// s3lock reads it whole; the same store under a general purpose bucket's
// reading fails with ErrUnorderedListing.
func TestDirectoryBuckets_VerifyReportsTheListingOrder(t *testing.T) {
	t.Parallel()
	_, tg, bucket := s3test.NewDirectoryBucket(t)
	api := s3test.NewClient(t, tg)
	c, err := s3lock.New(api, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := storecheck.Verify(t.Context(), c, ""); err != nil {
		t.Errorf("Verify of a directory bucket = %v; want nil", err)
	}
	rep, err := storecheck.Run(t.Context(), c, "")
	if err != nil {
		t.Fatal(err)
	}
	var order storecheck.Check
	for _, ch := range rep.Checks {
		if ch.Name == "listing order" {
			order = ch
		}
	}
	if !rep.OK || order.Status != storecheck.StatusOK || !strings.Contains(order.Detail, "directory bucket") {
		t.Errorf("Run of a directory bucket: OK %v, listing order %+v; want OK, the check saying it is a directory bucket", rep.OK, order)
	}
	if err := storecheck.VerifyAsGeneralPurpose(t.Context(), c); !errors.Is(err, s3lock.ErrUnorderedListing) {
		t.Errorf("Verify with the key-order reading = %v; want ErrUnorderedListing", err)
	}
	for _, probes := range []string{"s3lock-probe/probe-", "s3lock-probe/order-"} {
		if keys := s3test.Keys(t, api, bucket, probes); len(keys) != 0 {
			t.Errorf("the probes left %v behind", keys)
		}
	}
}

// TestVerify_RefusesAPrefixThatIsNoLockPrefix: the probe prefix is the lock
// name prefix the locks live under; anything else is refused with
// ErrInvalidConfig before any request (the cases of the client option
// WithProbePrefix it replaces).
func TestVerify_RefusesAPrefixThatIsNoLockPrefix(t *testing.T) {
	t.Parallel()
	c, err := s3lock.New(&s3.Client{}, "ok-bucket") // no request is made
	if err != nil {
		t.Fatal(err)
	}
	for prefix, want := range map[string]string{
		"../x/":               "probe prefix",
		"locks":               "ending in '/'",
		"locks/s3lock-probe/": "adds itself",
		"s3lock-probe/x/":     "reserved",
		"a//":                 "empty path segment",
	} {
		err := storecheck.Verify(t.Context(), c, prefix)
		if !errors.Is(err, s3lock.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify under %q = %v; want ErrInvalidConfig mentioning %q", prefix, err, want)
		}
		if _, err := storecheck.Run(t.Context(), c, prefix); !errors.Is(err, s3lock.ErrInvalidConfig) {
			t.Errorf("Run under %q = %v; want ErrInvalidConfig", prefix, err)
		}
	}
	if _, err := storecheck.Run(t.Context(), nil, ""); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("Run without a client = %v; want ErrInvalidConfig", err)
	}
}

// kinds counts the events an observer heard, by kind.
type kinds struct {
	mu sync.Mutex
	n  map[observe.Kind]int
}

func (k *kinds) Observe(e observe.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n[e.Kind]++
}

// The check's probe lock is no acquisition of the caller's: an observer of
// the client hears the check's requests, and no lease event (a "released"
// without an "acquired" would skew metrics per lock).
func TestRun_ItsProbeLockIsNoLeaseToTheObserver(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	heard := &kinds{n: map[observe.Kind]int{}}
	c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithObserver(heard))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storecheck.Run(t.Context(), c, ns.Prefix); err != nil {
		t.Fatal(err)
	}
	heard.mu.Lock()
	defer heard.mu.Unlock()
	if heard.n[observe.Request] == 0 || len(heard.n) != 1 {
		t.Errorf("the observer heard %v; want requests only", heard.n)
	}
}

// The check's probe lock is a plain lease whatever the client's defaults for
// acquisitions: a client made with WithSlots and WithOrder leaves no slot
// lock's marker (which never lapses, and would refuse every later plain
// probe) and no line under the probe prefix.
func TestRun_ItsProbeLockIgnoresTheClientsAcquisitionDefaults(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithSlots(3), s3lock.WithOrder(s3lock.OrderFIFO))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storecheck.Run(t.Context(), c, ns.Prefix); err != nil {
		t.Fatal(err)
	}
	out, err := ns.Client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(ns.Bucket),
		Prefix: aws.String(ns.Name("s3lock-probe/"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if k := aws.ToString(o.Key); strings.Contains(k, "/lock-slots/") || strings.Contains(k, "/lock-line/") {
			t.Errorf("the probe left %s: a slot lock's or a line's key", k)
		}
	}
}
