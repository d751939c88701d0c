package s3lock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestValidateName: ValidateName accepts valid lock names and refuses each invalid one with an ErrInvalidName saying why.
func TestValidateName(t *testing.T) {
	valid := []string{"locks", "team/db/migrate", "a", ":one-colon", "a/::b", "v1.2_x-y=z+w@h,o:s!t~", strings.Repeat("n", s3lock.MaxNameLength)}
	for _, n := range valid {
		if err := s3lock.ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v; want nil", n, err)
		}
	}
	invalid := map[string]string{
		"":                              "empty",
		"/abs":                          "starts with a slash",
		"trail/":                        "ends with a slash",
		"a//b":                          "empty path segment",
		"../escape":                     `".." segment`,
		"a/../../b":                     `".." segment`,
		"./a":                           `"." segment`,
		"a/lock-0000000001.json":        "looks like an epoch object",
		"x/s3lock-probe/y":              "reserved for storecheck",
		"s3lock-probe":                  "reserved for storecheck",
		"has space":                     "contains ' '",
		"tab\tname":                     `contains '\t'`,
		"back\\slash":                   `contains '\\'`,
		"bad\xffutf8":                   "not valid UTF-8",
		strings.Repeat("n", 513):        "513 bytes long",
		"percent%2e%2e":                 "contains '%'",
		"question?":                     "contains '?'",
		"star*":                         "contains '*'",
		"newline\n":                     `contains '\n'`,
		"unicode-é":                     "contains 'é'",
		"lock-1.json/inner":             "looks like an epoch object",
		"nested/lock-whatever.json/foo": "looks like an epoch object",
		"::error::forged":               `starts with "::"`,
	}
	for n, want := range invalid {
		err := s3lock.ValidateName(n)
		var ne *s3lock.NameError
		if !errors.Is(err, s3lock.ErrInvalidName) || !errors.As(err, &ne) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateName(%q) = %v; want ErrInvalidName mentioning %q", n, err, want)
		}
	}
}

// TestValidatePrefix: the one rule for a lock-name prefix (List, status
// --prefix, the s3lock_leases data source) accepts the beginning of every
// valid name and refuses what no name can start with.
func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "deploy/", "deploy/pr", "team/db/", "a", "x/s3lock-pro", "v1.2_x-y=z+w@h,o:s!t~/"} {
		if err := s3lock.ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v; want nil", p, err)
		}
	}
	for p, want := range map[string]string{
		"/abs":                   "starts with a slash",
		"a//":                    "empty path segment",
		"a//b":                   "empty path segment",
		"../x":                   `".." segment`,
		"a/./":                   `"." segment`,
		"x/s3lock-probe/":        "reserved for storecheck",
		"has space":              "contains ' '",
		"bad\xffutf8":            "not valid UTF-8",
		strings.Repeat("n", 513): "513 bytes long",
	} {
		err := s3lock.ValidatePrefix(p)
		var ne *s3lock.NameError
		if !errors.Is(err, s3lock.ErrInvalidName) || !errors.As(err, &ne) || !ne.Prefix || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "prefix") {
			t.Errorf("ValidatePrefix(%q) = %v; want an invalid-prefix error mentioning %q", p, err, want)
		}
	}
	c, err := s3lock.New(&s3.Client{}, "some-bucket") // never called: the prefix is refused first
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context(), "/abs"); !errors.Is(err, s3lock.ErrInvalidName) {
		t.Errorf("List with a prefix no name starts with = %v; want ErrInvalidName before any request", err)
	}
}

// TestBadNames_RejectedByEveryCall: every call that takes a lock name refuses an invalid one with ErrInvalidName, writing nothing.
func TestBadNames_RejectedByEveryCall(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "x", nil)
	ctx := t.Context()
	calls := map[string]func(string) error{
		"TryAcquire":   func(n string) error { _, err := c.TryAcquire(ctx, n); return err },
		"Acquire":      func(n string) error { _, err := c.Acquire(ctx, n); return err },
		"Current":      func(n string) error { _, err := c.Current(ctx, n); return err },
		"ForceRelease": func(n string) error { return c.ForceRelease(ctx, s3lock.Token{Name: n, Epoch: 1}) },
		"Adopt":        func(n string) error { _, err := c.Resume(ctx, s3lock.Token{Name: n, Epoch: 1}); return err },
	}
	for call, fn := range calls {
		for _, n := range []string{"", "../outside", "a//b"} {
			if err := fn(n); !errors.Is(err, s3lock.ErrInvalidName) {
				t.Errorf("%s(%q) = %v; want ErrInvalidName", call, n, err)
			}
		}
	}
	// What they would have written (the bucket may be shared: look only
	// where these names lead).
	for _, prefix := range []string{"/", "lock-", "../outside/", "a//b/"} {
		out, err := ns.Client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(ns.Bucket), Prefix: aws.String(prefix)})
		var re *smithyhttp.ResponseError
		switch {
		case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusBadRequest:
			// A store that refuses even to list such a prefix (MinIO:
			// XMinioInvalidResourceName) holds no key under it.
		case err != nil:
			t.Fatalf("listing %q: %v", prefix, err)
		case len(out.Contents) != 0:
			t.Errorf("invalid names wrote %d keys under %q, e.g. %s", len(out.Contents), prefix, aws.ToString(out.Contents[0].Key))
		}
	}
}

// TestNameCollision_IsAClearPermanentError: an object at a lock's name or at
// a parent path of it ("deploy" beside the locks "deploy/prod" and
// "deploy"). S3 holds both side by side; a store whose keys are files
// refuses the lock's objects there (versitygw: 409 ObjectParentIsFile), and
// one may hide them from its listings (MinIO, for the lock's own name). Either
// way acquiring fails at once with ErrNameCollision naming that object — not
// retried as "overloaded", never taken as a free lock — and Current never
// calls the lock free. A store that holds the lock beside the object must
// serve it as a lock: seen held while held, taken again after a release.
func TestNameCollision_IsAClearPermanentError(t *testing.T) {
	ns := s3test.New(t)
	putRaw(t, ns, ns.Name("deploy"), []byte("an object, not a lock"))
	counter, withCounter := counting()
	c := newLockClient(t, ns, "x", nil, withCounter)
	// The requests of a refusal: LIST and PUT; where the store took the
	// PUT, a LIST that misses it and the abandon of that epoch (a PUT, a
	// GET and a PUT); a HEAD of the epoch and one per path segment to name
	// the colliding object (a shared bucket's test prefix,
	// "s3lock-test/<hex>/", adds two).
	few := 9 + strings.Count(ns.Prefix, "/")
	for _, name := range []string{ns.Name("deploy/prod"), ns.Name("deploy")} {
		counter.Reset()
		l, err := c.TryAcquire(t.Context(), name)
		if err == nil {
			t.Logf("%s: the store holds the lock beside the object %s (%s)", name, ns.Name("deploy"), counter)
			servedAsALock(t, c, l)
			continue
		}
		if !errors.Is(err, s3lock.ErrNameCollision) || errors.Is(err, s3lock.ErrUnavailable) ||
			!strings.Contains(err.Error(), ns.Name("deploy")+" exists") {
			t.Errorf("TryAcquire(%s) = %v; want ErrNameCollision naming the object", name, err)
		}
		if n := counter.Total(); n > few {
			t.Errorf("TryAcquire(%s) took %d requests (%s); want a few", name, n, counter)
		}
		t.Logf("%s: refused in %s", name, counter)
		counter.Reset()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		_, err = c.Acquire(ctx, name)
		waitedOut := ctx.Err() != nil
		cancel()
		if !errors.Is(err, s3lock.ErrNameCollision) || waitedOut || counter.Total() > few {
			t.Errorf("Acquire(%s) = %v after %d requests; want ErrNameCollision at once", name, err, counter.Total())
		}
		if st, err := c.Current(t.Context(), name); !errors.Is(err, s3lock.ErrNameCollision) || !strings.Contains(err.Error(), ns.Name("deploy")) {
			t.Errorf("Current(%s) = %s (epoch %d), %v; want ErrNameCollision naming the object, never free", name, st.Phase(), st.Epoch, err)
		}
	}
}

// servedAsALock checks that the lock of l, just acquired, works as a lock:
// Current sees it held by l, and after l's release it is taken again at a
// newer epoch.
func servedAsALock(t *testing.T, c *s3lock.Client, l *s3lock.Lease) {
	t.Helper()
	st, err := c.Current(t.Context(), l.Token().Name)
	if err != nil || !st.Held || st.Epoch != l.Token().Epoch {
		t.Errorf("Current(%s) while held at epoch %d = %+v, %v; want it held", l.Token().Name, l.Token().Epoch, st, err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	again, err := c.TryAcquire(t.Context(), l.Token().Name)
	if err != nil {
		t.Fatalf("TryAcquire(%s) after a release = %v; want the lock", l.Token().Name, err)
	}
	if again.Token().Epoch <= l.Token().Epoch {
		t.Errorf("taken again at epoch %d after epoch %d", again.Token().Epoch, l.Token().Epoch)
	}
	if err := again.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestAcquire_BacksOffWhenTheLockKeepsChanging: a store whose listing shows
// an epoch object that its GET never finds (what a hidden or collided name
// looks like on some stores) makes every attempt start over. A waiting
// Acquire must back off, not spin.
func TestAcquire_BacksOffWhenTheLockKeepsChanging(t *testing.T) {
	ns := s3test.New(t)
	name := ns.Name("flapping")
	putRaw(t, ns, s3lock.Token{Name: name, Epoch: 1}.Key(), s3lock.EncodeReleasedForTest("old", 1, time.Minute))
	counter := &s3test.Counter{}
	c := newLockClient(t, ns, "x", nil, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return counter.Wrap(s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/lock-0") {
				return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Request: req,
					Header: http.Header{"Content-Type": {"application/xml"}},
					Body:   io.NopCloser(strings.NewReader(`<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>`))}, nil
			}
			return next.RoundTrip(req)
		}))
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := c.Acquire(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v; want it to keep trying until its deadline", err)
	}
	// With a backoff from 10 ms up to 2 s: a handful of attempts of two
	// requests each, where a fixed 10 ms pause made about 200 in 2 s.
	if n := counter.Total(); n > 40 {
		t.Errorf("Acquire spent %d requests (%s) in 2 s on a state that never settles; want it to back off", n, counter)
	}
	t.Logf("2 s of a state that never settles: %s", counter)
}

// hidingListings is a store whose listings hide every key under a prefix
// while GETs and PUTs find them, as MinIO's do for the epochs of a lock
// whose name collides with an object (an object "deploy" and the lock
// "deploy"). It is fault injection on the real server: the requests go to
// versitygw, and only the listings of the prefix come back empty.
func hidingListings(prefix string) s3test.Option {
	return hidingListingsOf(func(p string) bool { return strings.HasPrefix(p, prefix) })
}

// hidingListingsOf is hidingListings for the listings whose prefix hide
// says.
func hidingListingsOf(hide func(prefix string) bool) s3test.Option {
	return s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method != http.MethodGet || q.Get("list-type") != "2" || !hide(q.Get("prefix")) {
				return next.RoundTrip(req)
			}
			body := `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
				`<Name>b</Name><Prefix>` + q.Get("prefix") + `</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>` +
				`<IsTruncated>false</IsTruncated></ListBucketResult>`
			return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Request: req,
				Header: http.Header{"Content-Type": {"application/xml"}, "Date": {time.Now().UTC().Format(http.TimeFormat)}},
				Body:   io.NopCloser(strings.NewReader(body))}, nil
		})
	})
}

// TestNameCollision_HiddenListingIsDetected: on a store whose listing hides
// a lock's epoch objects, s3lock does not spin, does not call a held lock
// free and does not call a held lease deleted: Acquire, Current and Resume
// report ErrNameCollision within a few requests.
func TestNameCollision_HiddenListingIsDetected(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("hidden/prod")
	counter, withCounter := counting()
	holder := newLockClient(t, ns, "holder", nil)
	l, err := holder.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	token := l.Detach()
	blind := newLockClient(t, ns, "blind", nil, withCounter, hidingListings(ns.Name("hidden/")))

	st, err := blind.Current(t.Context(), name)
	if !errors.Is(err, s3lock.ErrNameCollision) || !strings.Contains(err.Error(), s3lock.Token{Name: name, Epoch: 1}.Key()) {
		t.Errorf("Current of a held lock whose listing is hidden = %+v, %v; want ErrNameCollision, not %s", st, err, st.Phase())
	}
	if _, err := blind.Resume(t.Context(), token); !errors.Is(err, s3lock.ErrNameCollision) {
		t.Errorf("Resume of a held lease whose listing is hidden = %v; want ErrNameCollision, not a deleted lease", err)
	}
	// Acquire: its create of epoch 1 finds it there; the next listing still
	// does not show it.
	counter.Reset()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = blind.Acquire(ctx, name)
	if !errors.Is(err, s3lock.ErrNameCollision) || ctx.Err() != nil {
		t.Errorf("Acquire of a lock whose listing is hidden = %v; want ErrNameCollision at once", err)
	}
	if n := counter.Total(); n > 12 {
		t.Errorf("Acquire took %d requests (%s) to find the hidden listing; want a few", n, counter)
	}
	// Released, the same: never taken "again" as epoch 1 over and over.
	if r, err := holder.Resume(t.Context(), token); err != nil {
		t.Fatal(err)
	} else if err := r.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	if _, err := blind.TryAcquire(t.Context(), name); !errors.Is(err, s3lock.ErrNameCollision) {
		t.Errorf("TryAcquire of a released lock whose listing is hidden = %v; want ErrNameCollision", err)
	}
	if n := counter.Total(); n > 12 {
		t.Errorf("TryAcquire took %d requests (%s); want a few", n, counter)
	}
	// A lock never held: the first lease of a client whose listing hides it
	// would be the last anyone could see (every later acquirer would find
	// the lock free and never get in). It is refused at once, and the epoch
	// it created released.
	fresh := ns.Name("hidden/fresh")
	counter.Reset()
	if l, err := blind.TryAcquire(t.Context(), fresh); !errors.Is(err, s3lock.ErrNameCollision) {
		t.Errorf("TryAcquire of a never-held lock whose listing is hidden = %v; want ErrNameCollision", err)
		if l != nil {
			mustRelease(t, l)
		}
	}
	if n := counter.Total(); n > 12 {
		t.Errorf("TryAcquire took %d requests (%s); want a few", n, counter)
	}
	if st, err := holder.Current(t.Context(), fresh); err != nil || st.Epoch != 1 || st.Phase() != s3lock.PhaseReleased {
		t.Errorf("the refused lease's epoch: %+v, %v; want epoch 1 released (abandoned)", st, err)
	}

	// A lock held at epoch 2 whose epoch 1 cleanup has deleted: a hidden
	// listing shows no epoch at all, and a create of epoch 1 succeeds. It
	// must not become a second lease beside the holder's.
	busy := ns.Name("hidden/busy")
	first, err := holder.TryAcquire(t.Context(), busy)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	second, err := holder.TryAcquire(t.Context(), busy)
	if err != nil || second.Token().Epoch != 2 {
		t.Fatalf("second lease: %v, %v; want epoch 2", second, err)
	}
	defer mustRelease(t, second)
	holder.WaitCleanup()
	if _, err := ns.Client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(s3lock.Token{Name: busy, Epoch: 1}.Key())}); err != nil {
		t.Fatal(err)
	}
	if l, err := blind.TryAcquire(t.Context(), busy); !errors.Is(err, s3lock.ErrNameCollision) {
		t.Errorf("TryAcquire of a lock held at epoch 2, epoch 1 gone, listing hidden = %v, %v; want ErrNameCollision, never a second holder", l, err)
		if l != nil {
			mustRelease(t, l)
		}
	}
	if st, err := holder.Current(t.Context(), busy); err != nil || !st.Held || st.Epoch != 2 {
		t.Errorf("the holder's lock after the refusal: %+v, %v; want held at epoch 2", st, err)
	}
}
