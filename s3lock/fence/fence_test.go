package fence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/transfer"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
)

func TestMain(m *testing.M) { os.Exit(s3test.MainCheckingLeaks(m)) }

// putFenced is fence.Put through a client over api with the default
// settings.
func putFenced(ctx context.Context, api s3lock.S3API, epoch uint64, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	bucket := "s3lock-fence-test" // any valid name: Put writes to in's bucket
	if in != nil && aws.ToString(in.Bucket) != "" {
		bucket = aws.ToString(in.Bucket)
	}
	c, err := s3lock.New(api, bucket)
	if err != nil {
		return nil, err
	}
	return fence.Put(ctx, c, epoch, in)
}

// newLockClient returns an s3lock client of ns's bucket.
func newLockClient(t *testing.T, ns *s3test.Namespace, holder string, opts ...s3lock.Option) *s3lock.Client {
	t.Helper()
	c, err := s3lock.New(ns.Client, ns.Bucket, append([]s3lock.Option{s3lock.WithHolder(holder)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPut_StaleLeaseCannotOverwrite: a holder that paused past the
// end of its lease cannot overwrite what the next holder wrote.
func TestPut_StaleLeaseCannotOverwrite(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	name := ns.Name("fenced")
	target := ns.Name("protected/state.json")
	a := newLockClient(t, ns, "paused", s3lock.WithLeaseDuration(2*time.Second))
	b := newLockClient(t, ns, "next", s3lock.WithPollInterval(50*time.Millisecond))
	put := func(epoch uint64, body string) error {
		_, err := putFenced(t.Context(), ns.Client, epoch, &s3.PutObjectInput{
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
		return string(b), out.Metadata["s3lock-epoch"]
	}

	la, err := a.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := put(la.Token().Epoch, "a-before-pause"); err != nil {
		t.Fatalf("fenced write under a valid lease: %v", err)
	}
	// a pauses; its lease lapses and b takes over.
	lb, err := b.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lb.Release(t.Context()); err != nil {
			t.Error(err)
		}
	}()
	if err := put(lb.Token().Epoch, "b"); err != nil {
		t.Fatalf("fenced write by the new holder: %v", err)
	}
	// a wakes up and writes with its old epoch.
	err = put(la.Token().Epoch, "a-after-pause")
	var fe *fence.Error
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) || fe.Current != lb.Token().Epoch || fe.Epoch != la.Token().Epoch {
		t.Fatalf("stale fenced write = %v; want ErrFenced (epoch %d < %d)", err, la.Token().Epoch, lb.Token().Epoch)
	}
	if body, epoch := read(); body != "b" || epoch != "2" {
		t.Errorf("object = %q written under epoch %s; want b's write under epoch 2", body, epoch)
	}
	// The same epoch may write again.
	if err := put(lb.Token().Epoch, "b-again"); err != nil {
		t.Errorf("second write by the same epoch: %v", err)
	}
}

// TestPut_StaleWriteAfterIdenticalRewrite (issue 7, item 4): a newer
// epoch that rewrote the bytes an object already held left its ETag
// unchanged (the epoch is metadata, the ETag covers only the bytes), so an
// older epoch's write delayed between its HEAD and its PUT still matched
// If-Match and landed after the newer epoch's write. Now the newer epoch's
// write is refused and writes nothing, so the delayed write that lands is
// ordered before any write of the newer epoch; once the newer epoch writes
// bytes of its own, the older one is fenced out.
func TestPut_StaleWriteAfterIdenticalRewrite(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	key := ns.Name("protected/state.json")
	const stale, newer = 5, 6
	if err := fencedPut(t, ns.Client, ns, key, stale, strings.NewReader("X")); err != nil {
		t.Fatal(err)
	}
	finish := delayedPut(t, ns, key, stale, "Y") // has read X, not yet written

	errNewer := fencedPut(t, ns.Client, ns, key, newer, strings.NewReader("X"))
	var ie *fence.Error
	if !errors.Is(errNewer, fence.ErrIdenticalRewrite) || !errors.As(errNewer, &ie) || ie.Epoch != newer || ie.Current != stale {
		t.Errorf("epoch %d rewriting the bytes epoch %d wrote = %v; want ErrIdenticalRewrite (epoch %d over %d)",
			newer, stale, errNewer, newer, stale)
	}
	if errors.Is(errNewer, fence.ErrFenced) {
		t.Errorf("%v matches ErrFenced; the caller's epoch is the newest, not stale", errNewer)
	}
	errStale := finish()
	body, epoch := readFenced(t, ns, key)
	if errNewer == nil && (errStale == nil || body != "X" || epoch != "6") {
		t.Fatalf("epoch %d's write succeeded, then epoch %d's delayed write returned %v and left %q under epoch %s; "+
			"want it fenced out and X under epoch 6", newer, stale, errStale, body, epoch)
	}
	if errNewer != nil && (errStale != nil || body != "Y" || epoch != "5") {
		t.Fatalf("after the refused rewrite, the delayed write of epoch %d returned %v and the object is %q under epoch %s; "+
			"want Y under epoch 5 (the refused write wrote nothing)", stale, errStale, body, epoch)
	}

	// The remedy: bytes of its own. From then on epoch 5 is fenced out.
	if err := fencedPut(t, ns.Client, ns, key, newer, strings.NewReader("X (epoch 6)")); err != nil {
		t.Fatalf("epoch %d writing bytes of its own: %v", newer, err)
	}
	if err := fencedPut(t, ns.Client, ns, key, stale, strings.NewReader("Y")); !errors.Is(err, fence.ErrFenced) {
		t.Errorf("epoch %d writing after epoch %d = %v; want ErrFenced", stale, newer, err)
	}
	if body, epoch := readFenced(t, ns, key); body != "X (epoch 6)" || epoch != "6" {
		t.Errorf("object = %q under epoch %s; want epoch 6's write", body, epoch)
	}
}

// TestPut_DelayedStaleWriterFencedByNewBytes: an older epoch's write
// delayed between its HEAD and its PUT does not land once a newer epoch has
// written different bytes.
func TestPut_DelayedStaleWriterFencedByNewBytes(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	key := ns.Name("protected/state.json")
	if err := fencedPut(t, ns.Client, ns, key, 5, strings.NewReader("X")); err != nil {
		t.Fatal(err)
	}
	finish := delayedPut(t, ns, key, 5, "Y")
	if err := fencedPut(t, ns.Client, ns, key, 6, strings.NewReader("X (epoch 6)")); err != nil {
		t.Fatalf("newer epoch's write: %v", err)
	}
	err := finish()
	var fe *fence.Error
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) || fe.Epoch != 5 || fe.Current != 6 {
		t.Errorf("delayed write of epoch 5 = %v; want ErrFenced (epoch 5 < 6)", err)
	}
	if body, epoch := readFenced(t, ns, key); body != "X (epoch 6)" || epoch != "6" {
		t.Errorf("object = %q under epoch %s; want epoch 6's write", body, epoch)
	}
}

// TestPut_IdenticalRewrite: which rewrites of the current bytes
// Put refuses, and that hashing the body does not consume it.
func TestPut_IdenticalRewrite(t *testing.T) {
	t.Parallel()
	offset := func(prefix, body string) io.Reader { // a ReadSeeker not at 0
		r := strings.NewReader(prefix + body)
		_, _ = r.Seek(int64(len(prefix)), io.SeekStart)
		return r
	}
	plain := func(body string) io.Reader { return struct{ io.Reader }{strings.NewReader(body)} }
	tests := []struct {
		name      string
		prior     func(t *testing.T, ns *s3test.Namespace, key string) // writes "X"
		epoch     uint64
		body      io.Reader
		etag      func(string) string // how the store spells the ETag
		wantErr   error
		wantBody  string
		wantEpoch string
	}{
		{name: "same epoch", prior: fencedX(6), epoch: 6, body: strings.NewReader("X"),
			wantBody: "X", wantEpoch: "6"},
		{name: "newer epoch", prior: fencedX(5), epoch: 6, body: strings.NewReader("X"),
			wantErr: fence.ErrIdenticalRewrite, wantBody: "X", wantEpoch: "5"},
		{name: "newer epoch, seeker not at 0", prior: fencedX(5), epoch: 6, body: offset("skip:", "X"),
			wantErr: fence.ErrIdenticalRewrite, wantBody: "X", wantEpoch: "5"},
		{name: "newer epoch, plain reader", prior: fencedX(5), epoch: 6, body: plain("X"),
			wantErr: fence.ErrIdenticalRewrite, wantBody: "X", wantEpoch: "5"},
		{name: "newer epoch, ETag upper case without quotes", prior: fencedX(5), epoch: 6, body: strings.NewReader("X"),
			etag:    func(s string) string { return strings.ToUpper(strings.Trim(s, `"`)) },
			wantErr: fence.ErrIdenticalRewrite, wantBody: "X", wantEpoch: "5"},
		{name: "no epoch recorded", prior: unfencedX, epoch: 1, body: strings.NewReader("X"),
			wantErr: fence.ErrIdenticalRewrite, wantBody: "X", wantEpoch: ""},
		{name: "multipart ETag", prior: multipartX(5), epoch: 6, body: strings.NewReader("X"),
			wantBody: "X", wantEpoch: "6"},
		{name: "different bytes, seeker not at 0", prior: fencedX(5), epoch: 6, body: offset("skip:", "Y"),
			wantBody: "Y", wantEpoch: "6"},
		{name: "different bytes, plain reader", prior: fencedX(5), epoch: 6, body: plain("Y"),
			wantBody: "Y", wantEpoch: "6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := s3test.New(t)
			key := ns.Name("state.json")
			tt.prior(t, ns, key)
			var api s3lock.S3API = ns.Client
			if tt.etag != nil {
				api = &etagSpelling{S3API: ns.Client, spell: tt.etag}
			}
			err := fencedPut(t, api, ns, key, tt.epoch, tt.body)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Put = %v; want %v", err, tt.wantErr)
			}
			if body, epoch := readFenced(t, ns, key); body != tt.wantBody || epoch != tt.wantEpoch {
				t.Errorf("object = %q under epoch %q; want %q under epoch %q", body, epoch, tt.wantBody, tt.wantEpoch)
			}
		})
	}
}

// fencedPut writes body to key under epoch through api.
func fencedPut(t *testing.T, api s3lock.S3API, ns *s3test.Namespace, key string, epoch uint64, body io.Reader) error {
	t.Helper()
	_, err := putFenced(t.Context(), api, epoch, &s3.PutObjectInput{
		Bucket: aws.String(ns.Bucket), Key: aws.String(key), Body: body,
	})
	return err
}

// readFenced returns the object's content and the epoch it records.
func readFenced(t *testing.T, ns *s3test.Namespace, key string) (body, epoch string) {
	t.Helper()
	out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), out.Metadata["s3lock-epoch"]
}

// delayedPut starts a Put of body under epoch whose PutObject
// waits, after its HeadObject, until finish is called; finish returns its
// result. It is a writer that paused between reading and writing.
func delayedPut(t *testing.T, ns *s3test.Namespace, key string, epoch uint64, body string) (finish func() error) {
	t.Helper()
	api := &pausedPut{S3API: ns.Client, reached: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := putFenced(t.Context(), api, epoch, &s3.PutObjectInput{
			Bucket: aws.String(ns.Bucket), Key: aws.String(key), Body: strings.NewReader(body),
		})
		done <- err
	}()
	select {
	case <-api.reached:
	case err := <-done:
		t.Fatalf("the delayed write of epoch %d ended before its PutObject: %v", epoch, err)
	}
	return func() error {
		close(api.release)
		return <-done
	}
}

// pausedPut is an S3API whose first PutObject closes reached and then waits
// for release (or the request's context).
type pausedPut struct {
	s3lock.S3API
	reached, release chan struct{}
	once             sync.Once
}

func (p *pausedPut) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	first := false
	p.once.Do(func() { first = true })
	if first {
		close(p.reached)
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.S3API.PutObject(ctx, in, opts...)
}

// etagSpelling is an S3API whose HeadObject reports the ETag respelled, as
// stores differ in case and quoting.
type etagSpelling struct {
	s3lock.S3API
	spell func(string) string
}

func (e *etagSpelling) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	out, err := e.S3API.HeadObject(ctx, in, opts...)
	if err == nil && out.ETag != nil {
		out.ETag = aws.String(e.spell(*out.ETag))
	}
	return out, err
}

// fencedX writes "X" with Put under epoch.
func fencedX(epoch uint64) func(t *testing.T, ns *s3test.Namespace, key string) {
	return func(t *testing.T, ns *s3test.Namespace, key string) {
		t.Helper()
		if err := fencedPut(t, ns.Client, ns, key, epoch, strings.NewReader("X")); err != nil {
			t.Fatal(err)
		}
	}
}

// unfencedX writes "X" without recording an epoch.
func unfencedX(t *testing.T, ns *s3test.Namespace, key string) {
	t.Helper()
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(ns.Bucket), Key: aws.String(key), Body: strings.NewReader("X"),
	}); err != nil {
		t.Fatal(err)
	}
}

// multipartX writes "X" as a one-part multipart upload recording epoch, so
// its ETag is the MD5 of the part's MD5 with "-1", not the MD5 of "X".
func multipartX(epoch uint64) func(t *testing.T, ns *s3test.Namespace, key string) {
	return func(t *testing.T, ns *s3test.Namespace, key string) {
		t.Helper()
		ctx, bucket := t.Context(), aws.String(ns.Bucket)
		up, err := ns.Client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bucket, Key: aws.String(key),
			Metadata: map[string]string{"s3lock-epoch": strconv.FormatUint(epoch, 10)}})
		if err != nil {
			t.Fatal(err)
		}
		part, err := ns.Client.UploadPart(ctx, &s3.UploadPartInput{Bucket: bucket, Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("X")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: bucket, Key: aws.String(key),
			UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{
				Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}}); err != nil {
			t.Fatal(err)
		}
		head, err := ns.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(strings.Trim(aws.ToString(head.ETag), `"`), "-1") {
			t.Fatalf("multipart ETag = %s; want one ending in -1", aws.ToString(head.ETag))
		}
	}
}

// TestPut_GivesUpWhenTheStoreNeverAnswers: every request of Put
// is bounded by the request timeout, so a store that accepts connections and
// never answers fails the write as unavailable, naming the timeout, while
// the caller's context is still far from its end (before, it hung until the
// caller's context ended).
func TestPut_GivesUpWhenTheStoreNeverAnswers(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	if !ns.Target.Local {
		t.Skip("needs the local server behind a proxy of the test's own")
	}
	proxy := s3test.NewProxy(t, ns.Target.Endpoint)
	tg := ns.Target
	tg.Endpoint = proxy.URL
	c, err := s3lock.New(s3test.NewClient(t, tg, s3test.WithoutRetries()), ns.Bucket, s3lock.WithRequestTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	_, err = fence.Put(ctx, c, 3, &s3.PutObjectInput{
		Bucket: aws.String(ns.Bucket), Key: aws.String(ns.Name("hung.json")), Body: strings.NewReader("x"),
	})
	if !errors.Is(err, s3lock.ErrUnavailable) || !strings.Contains(err.Error(), "no answer within 300ms") || ctx.Err() != nil {
		t.Fatalf("Put against a store that never answers = %v (ctx: %v); want ErrUnavailable after the 300ms request timeout", err, ctx.Err())
	}
	if where := "s3://" + ns.Bucket + "/" + ns.Name("hung.json"); !strings.Contains(err.Error(), where) {
		t.Errorf("the error %q does not name %s, the object written", err, where)
	}
}

// TestPut_ReadModifyWrite: with the ETag the caller read as IfMatch
// (or IfNoneMatch "*" for an object it read absent), Put writes only
// over that state. Without it, an update computed from a read is lost when
// another write of a current epoch lands between the read and Put's
// own HEAD.
func TestPut_ReadModifyWrite(t *testing.T) {
	ns := s3test.New(t)
	key := ns.Name("state.json")
	put := func(epoch uint64, body string, ifMatch, ifNoneMatch *string) (*s3.PutObjectOutput, error) {
		return putFenced(t.Context(), ns.Client, epoch, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
			Key: aws.String(key), Body: strings.NewReader(body), IfMatch: ifMatch, IfNoneMatch: ifNoneMatch})
	}
	first, err := put(1, `{"n":1}`, nil, aws.String("*"))
	if err != nil {
		t.Fatalf("create, read absent: %v", err)
	}
	if _, err := put(1, `{"n":1,"again":true}`, nil, aws.String("*")); !errors.Is(err, fence.ErrObjectChanged) {
		t.Errorf("create over an existing object, read absent: %v; want ErrObjectChanged", err)
	}
	// Someone else's write lands after our read of `first`.
	second, err := put(1, `{"n":2}`, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var changed *fence.Error
	_, err = put(1, `{"n":2,"from":"first"}`, first.ETag, nil)
	if !errors.Is(err, fence.ErrObjectChanged) || !errors.As(err, &changed) ||
		changed.Expected != aws.ToString(first.ETag) || changed.Found != aws.ToString(second.ETag) ||
		!strings.Contains(err.Error(), key) {
		t.Fatalf("write over a state changed since the read: %v; want ErrObjectChanged naming both ETags and the key", err)
	}
	if _, err := put(1, `{"n":3}`, second.ETag, nil); err != nil {
		t.Fatalf("write over the state read: %v", err)
	}
	// A newer epoch's change is reported as such: the caller's lease is over.
	newer, err := put(2, `{"n":4}`, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(1, `{"n":5}`, newer.ETag, nil); !errors.Is(err, fence.ErrFenced) {
		t.Errorf("an older epoch over a newer epoch's state: %v; want ErrFenced", err)
	}
	for _, bad := range []struct{ ifMatch, ifNoneMatch *string }{
		{aws.String(`"x"`), aws.String("*")}, {nil, aws.String(`"x"`)}, {aws.String(""), nil},
	} {
		if _, err := put(2, `{}`, bad.ifMatch, bad.ifNoneMatch); !errors.Is(err, s3lock.ErrInvalidConfig) {
			t.Errorf("IfMatch %v, IfNoneMatch %v: %v; want ErrInvalidConfig", aws.ToString(bad.ifMatch), aws.ToString(bad.ifNoneMatch), err)
		}
	}
}

// TestPut_ReadModifyWriteWhoseAnswerWasLost: the store applies the
// write and the answer is lost; the SDK's retry gets 412 (the ETag moved).
// Put's next HEAD finds its own body under its own epoch: written.
// With the SDK's retries the retry gets 412; without them Put itself
// sees the failure. Either way it must not report the write as failed (a
// caller would redo it) nor as changed.
func TestPut_ReadModifyWriteWhoseAnswerWasLost(t *testing.T) {
	ns := s3test.New(t)
	for i, retries := range []bool{true, false} {
		key := ns.Name(fmt.Sprintf("state-%d.json", i))
		f := s3test.NewFaults(1, s3test.Rule{Fault: s3test.DropResponse, Ops: []string{"PutObject"}, Probability: 1, Limit: 1})
		opts := []s3test.Option{s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { return f.Wrap(next) })}
		if !retries {
			opts = append(opts, s3test.WithoutRetries())
		}
		out, err := putFenced(t.Context(), ns.NewClient(t, opts...), 3, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
			Key: aws.String(key), Body: strings.NewReader(`{"n":1}`), IfNoneMatch: aws.String("*")})
		if err != nil {
			t.Fatalf("SDK retries %v: Put whose answer was lost: %v; want it written", retries, err)
		}
		if f.Injected()[s3test.DropResponse] != 1 {
			t.Fatal("no answer was dropped: the test did not exercise the lost answer")
		}
		head, err := ns.Client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key)})
		if err != nil || aws.ToString(head.ETag) != aws.ToString(out.ETag) {
			t.Errorf("object ETag %v (%v); Put returned %v", aws.ToString(head.ETag), err, aws.ToString(out.ETag))
		}
	}
}

// TestPut_ReadModifyWriteTellsItsOwnWriteFromAnIdenticalOne: two
// writers of the same epoch read the same state and compute the same bytes
// (two increments of a counter, say). One lands; the other must not take
// that write for its own, or an increment is lost without an error.
func TestPut_ReadModifyWriteTellsItsOwnWriteFromAnIdenticalOne(t *testing.T) {
	ns := s3test.New(t)
	key := ns.Name("counter.json")
	put := func(body string, ifMatch *string, ifNoneMatch *string) (*s3.PutObjectOutput, error) {
		return putFenced(t.Context(), ns.Client, 7, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
			Key: aws.String(key), Body: strings.NewReader(body), IfMatch: ifMatch, IfNoneMatch: ifNoneMatch})
	}
	read, err := put(`{"n":5}`, nil, aws.String("*"))
	if err != nil {
		t.Fatal(err)
	}
	// A 412 on the second's first PUT (the first writer got there first)
	// makes it HEAD again: it finds the same bytes under the same epoch,
	// written by the other call.
	var once sync.Once
	api := ns.NewClient(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper {
		return s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut {
				once.Do(func() { _, _ = put(`{"n":6}`, read.ETag, nil) }) // the other writer lands first
			}
			return next.RoundTrip(req)
		})
	}))
	_, err = putFenced(t.Context(), api, 7, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
		Key: aws.String(key), Body: strings.NewReader(`{"n":6}`), IfMatch: read.ETag})
	var changed *fence.Error
	if !errors.Is(err, fence.ErrObjectChanged) || !errors.As(err, &changed) || !changed.MayHaveWritten {
		t.Errorf("the second identical increment: %v; want ErrObjectChanged (it must read again), MayHaveWritten", err)
	}
	if _, err := put(`{"n":7}`, aws.String(`"not-there"`), nil); !errors.Is(err, fence.ErrObjectChanged) {
		t.Errorf("IfMatch of an ETag the object never had: %v; want ErrObjectChanged", err)
	}
}

// TestPut_GivesALargeBodyTimeToTravel: Put's PUT gets the
// request timeout plus the transfer allowance of its body, so a large state on a
// slow link is not cut off by a timeout sized for lease objects (before,
// every request had the same 30 s, and a state that took longer to upload
// could never be written); its HEAD keeps the request timeout.
func TestPut_GivesALargeBodyTimeToTravel(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]time.Duration{0: 0, 1 << 20: 8 * time.Second, 128 << 10: time.Second, 64 << 10: 500 * time.Millisecond} {
		if got := transfer.Allowance(n); got != want {
			t.Errorf("transfer.Allowance(%d) = %s; want %s", n, got, want)
		}
	}
	ns := s3test.New(t)
	api := &deadlineRecorder{S3API: ns.Client, left: map[string]time.Duration{}}
	const timeout = 2 * time.Second
	c, err := s3lock.New(api, ns.Bucket, s3lock.WithRequestTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 4<<20)
	if _, err := fence.Put(t.Context(), c, 1, &s3.PutObjectInput{
		Bucket: aws.String(ns.Bucket), Key: aws.String(ns.Name("large.json")), Body: strings.NewReader(body),
	}); err != nil {
		t.Fatal(err)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	allowance := transfer.Allowance(int64(len(body))) // 32 s
	if left := api.left["HeadObject"]; left > timeout {
		t.Errorf("the HEAD had %s left; want at most the request timeout, %s", left, timeout)
	}
	if left := api.left["PutObject"]; left <= allowance || left > timeout+allowance {
		t.Errorf("the PUT of %d bytes had %s left; want the request timeout plus %s", len(body), left, allowance)
	}
}

// deadlineRecorder records how long each kind of request had before its
// context's deadline, as it was sent.
type deadlineRecorder struct {
	s3lock.S3API
	mu   sync.Mutex
	left map[string]time.Duration
}

func (d *deadlineRecorder) note(ctx context.Context, op string) {
	if deadline, ok := ctx.Deadline(); ok {
		d.mu.Lock()
		d.left[op] = time.Until(deadline)
		d.mu.Unlock()
	}
}

func (d *deadlineRecorder) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	d.note(ctx, "HeadObject")
	return d.S3API.HeadObject(ctx, in, opts...)
}

func (d *deadlineRecorder) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	d.note(ctx, "PutObject")
	return d.S3API.PutObject(ctx, in, opts...)
}

// TestPut_RefusesWhatItCannotWrite: no client, no input, an input without
// its bucket or key, and an epoch no lease has are refused with
// ErrInvalidConfig before any request.
func TestPut_RefusesWhatItCannotWrite(t *testing.T) {
	t.Parallel()
	c, err := s3lock.New(&s3.Client{}, "ok-bucket") // no request is made
	if err != nil {
		t.Fatal(err)
	}
	in := &s3.PutObjectInput{Bucket: aws.String("ok-bucket"), Key: aws.String("state.json")}
	for _, tc := range []struct {
		what   string
		client *s3lock.Client
		epoch  uint64
		in     *s3.PutObjectInput
	}{
		{"no client", nil, 1, in},
		{"no input", c, 1, nil},
		{"no key", c, 1, &s3.PutObjectInput{Bucket: aws.String("ok-bucket")}},
		{"epoch 0", c, 0, in},
		{"epoch past MaxEpoch", c, s3lock.MaxEpoch + 1, in},
	} {
		if _, err := fence.Put(t.Context(), tc.client, tc.epoch, tc.in); !errors.Is(err, s3lock.ErrInvalidConfig) {
			t.Errorf("%s: Put = %v; want ErrInvalidConfig", tc.what, err)
		}
	}
}
