package s3lock_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// requiring is a bucket policy in front of the real store: it denies, as AWS
// does with a policy on s3:x-amz-server-side-encryption, every PUT that does
// not carry header (with want, if set), and notes every request it saw.
type requiring struct {
	next         http.RoundTripper
	header, want string
	mu           sync.Mutex
	seen         []string // "METHOD key header-value"
}

func (r *requiring) RoundTrip(req *http.Request) (*http.Response, error) {
	v := req.Header.Get(r.header)
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path+" "+v)
	r.mu.Unlock()
	if req.Method == http.MethodPut && (v == "" || r.want != "" && v != r.want) {
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req,
			Header: http.Header{"Content-Type": {"application/xml"}},
			Body:   io.NopCloser(strings.NewReader(`<Error><Code>AccessDenied</Code><Message>unencrypted PUT denied by bucket policy</Message></Error>`))}, nil
	}
	return r.next.RoundTrip(req)
}

// missing returns the requests of methods (all if none) that lacked the
// header.
func (r *requiring) missing(methods ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		f := strings.SplitN(s, " ", 3)
		bucketAndKey := strings.SplitN(strings.TrimPrefix(f[1], "/"), "/", 2)
		object := len(bucketAndKey) == 2 && bucketAndKey[1] != "" // not a listing of the bucket
		if object && (len(methods) == 0 || slices.Contains(methods, f[0])) && f[2] == "" {
			out = append(out, s)
		}
	}
	return out
}

// exercise does what writes s3lock objects: acquire (create), renew,
// release, an ordered waiter's ticket, a fenced write, and the store check
// (probes and a probe lock).
func exercise(t *testing.T, ns *s3test.Namespace, c *s3lock.Client, prefix string) error {
	t.Helper()
	name := ns.Name(prefix + "encrypted")
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew())
	if err != nil {
		return err
	}
	waiting := make(chan error, 1)
	go func() {
		w, err := c.Acquire(t.Context(), name, s3lock.WithOrder(s3lock.OrderFIFO))
		if err == nil {
			err = w.Release(t.Context())
		}
		waiting <- err
	}()
	testkit.Eventually(t, waitLimit, "the waiter to join the line", func() bool {
		ws, err := c.Line(t.Context(), name)
		return err == nil && len(ws) == 1
	})
	if err := l.Renew(t.Context()); err != nil {
		return err
	}
	if _, err := fence.Put(t.Context(), c, l.Token().Epoch, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
		Key: aws.String(ns.Name(prefix + "state.json")), Body: strings.NewReader(`{"epoch":1}`)}); err != nil {
		return err
	}
	if err := l.Release(t.Context()); err != nil {
		return err
	}
	if err := <-waiting; err != nil {
		return err
	}
	// A slot lock: its marker, a slot's lease, and an operator's release.
	pool := ns.Name(prefix + "pool")
	sl, err := c.TryAcquire(t.Context(), pool, s3lock.WithSlots(2), s3lock.WithoutAutoRenew())
	if err != nil {
		return err
	}
	sl.Detach() // an operator releases it from elsewhere
	if err := c.ForceRelease(t.Context(), s3lock.Token{Name: pool, Slot: sl.Token().Slot, Epoch: sl.Token().Epoch}); err != nil {
		return err
	}
	_, err = storecheck.Run(t.Context(), c, ns.Prefix)
	return err
}

// conditionalOnly is a bucket policy that denies every PUT carrying neither
// If-None-Match nor If-Match, as one with a Null condition on both
// s3:if-none-match and s3:if-match does on AWS (the README's "Permissions").
type conditionalOnly struct {
	next           http.RoundTripper
	passed, denied atomic.Int64
}

func (p *conditionalOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		if req.Header.Get("If-None-Match") == "" && req.Header.Get("If-Match") == "" {
			p.denied.Add(1)
			return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req,
				Header: http.Header{"Content-Type": {"application/xml"}},
				Body:   io.NopCloser(strings.NewReader(`<Error><Code>AccessDenied</Code><Message>unconditional PUT denied by bucket policy</Message></Error>`))}, nil
		}
		p.passed.Add(1)
	}
	return p.next.RoundTrip(req)
}

// TestBucketPolicy_EveryWriteIsConditional: s3lock writes nothing without a
// condition — creates, renewals, releases, tickets, markers, slots, probes,
// force-releases, fenced writes — so a bucket policy that requires
// conditional writes on the lock prefix accepts all of it.
func TestBucketPolicy_EveryWriteIsConditional(t *testing.T) {
	ns := s3test.New(t)
	pol := &conditionalOnly{}
	api := ns.NewClient(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { pol.next = next; return pol }))
	c, err := s3lock.New(api, ns.Bucket, s3lock.WithHolder("conditional"))
	if err != nil {
		t.Fatal(err)
	}
	if err := exercise(t, ns, c, "conditional/"); err != nil {
		t.Fatalf("a bucket that requires conditional writes refused one: %v", err)
	}
	if pol.denied.Load() != 0 || pol.passed.Load() == 0 {
		t.Errorf("%d unconditional PUTs, %d conditional; want none unconditional", pol.denied.Load(), pol.passed.Load())
	}
}

func TestObjectSettings_EncryptEveryWrite(t *testing.T) {
	ns := s3test.New(t)
	for _, tc := range []struct {
		what   string
		opt    s3lock.Option
		header string
		value  string
	}{
		{"SSE-S3", s3lock.WithServerSideEncryption(""), "X-Amz-Server-Side-Encryption", "AES256"},
		{"SSE-KMS", s3lock.WithServerSideEncryption("alias/locks"), "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id", "alias/locks"},
		{"ACL", s3lock.WithACL("bucket-owner-full-control"), "X-Amz-Acl", "bucket-owner-full-control"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			pol := &requiring{header: tc.header, want: tc.value}
			api := ns.NewClient(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { pol.next = next; return pol }))
			c, err := s3lock.New(api, ns.Bucket, s3lock.WithHolder("enc"), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := exercise(t, ns, c, tc.what+"/"); err != nil {
				t.Fatalf("with %s set, a bucket that requires it refused: %v", tc.what, err)
			}
			if m := pol.missing(http.MethodPut); len(m) > 0 {
				t.Errorf("PUTs without %s: %v", tc.header, m)
			}
			// Without the setting, the policy refuses at once, clearly.
			plain, err := s3lock.New(api, ns.Bucket, s3lock.WithHolder("plain"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plain.TryAcquire(t.Context(), ns.Name("plain-"+tc.what)); !errors.Is(err, s3lock.ErrAccessDenied) {
				t.Errorf("without %s: %v; want ErrAccessDenied", tc.what, err)
			}
		})
	}
}

func TestObjectSettings_SSECustomerKeyOnEveryRequestAndInNoMessage(t *testing.T) {
	ns := s3test.New(t)
	if ns.Target.Store == s3server.MinIO && !strings.HasPrefix(ns.Target.Endpoint, "https://") {
		// MinIO, as AWS, refuses SSE-C over plain HTTP ("must be made over
		// a secure connection"): a MinIO of its own that speaks HTTPS.
		ns = s3test.NewTLSStoreOf(t, s3server.MinIO).Namespace()
	}
	key := bytes.Repeat([]byte("k3y!"), 8)
	pol := &requiring{header: "X-Amz-Server-Side-Encryption-Customer-Key", want: base64.StdEncoding.EncodeToString(key)}
	api := ns.NewClient(t, s3test.WithTransport(func(next http.RoundTripper) http.RoundTripper { pol.next = next; return pol }))
	var logs bytes.Buffer
	c, err := s3lock.New(api, ns.Bucket, s3lock.WithHolder("ssec"),
		s3lock.WithSSECustomerKey(key), s3lock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	if err := exercise(t, ns, c, "ssec/"); err != nil {
		if strings.HasPrefix(ns.Target.Endpoint, "http://") && strings.Contains(err.Error(), "over a secure connection") {
			// An external endpoint over plain HTTP (the local MinIO above
			// is given HTTPS).
			t.Skipf("the store refuses SSE-C over plain HTTP, as AWS does (%v): run the suite on its HTTPS endpoint", err)
		}
		t.Fatal(err)
	}
	if m := pol.missing(http.MethodPut, http.MethodGet, http.MethodHead); len(m) > 0 {
		t.Errorf("object requests without the SSE-C key: %v", m)
	}
	// An error on the way (a request timeout) says nothing of the key.
	slow, err := s3lock.New(ns.NewClient(t, s3test.WithTransport(func(http.RoundTripper) http.RoundTripper {
		return s3test.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
	}), s3test.WithoutRetries()), ns.Bucket, s3lock.WithSSECustomerKey(key), s3lock.WithRequestTimeout(200*time.Millisecond),
		s3lock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	_, err = slow.TryAcquire(t.Context(), ns.Name("ssec-timeout"))
	for _, text := range []string{fmtErr(err), logs.String()} {
		if strings.Contains(text, string(key)) || strings.Contains(text, base64.StdEncoding.EncodeToString(key)) {
			t.Errorf("the SSE-C key leaked: %s", text)
		}
	}
	for _, bad := range [][]byte{nil, make([]byte, 16)} {
		if err := s3lock.ValidateConfig("b", s3lock.WithSSECustomerKey(bad)); !errors.Is(err, s3lock.ErrInvalidConfig) {
			t.Errorf("WithSSECustomerKey(%d bytes) = %v; want ErrInvalidConfig", len(bad), err)
		}
	}
	if err := s3lock.ValidateConfig("b", s3lock.WithSSECustomerKey(key), s3lock.WithServerSideEncryption("")); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("SSE-C with SSE-S3 = %v; want ErrInvalidConfig", err)
	}
	if err := s3lock.ValidateConfig("b", s3lock.WithACL("world-writable")); !errors.Is(err, s3lock.ErrInvalidConfig) {
		t.Errorf("WithACL(world-writable) = %v; want ErrInvalidConfig", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
