package tfstate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestStore_RefusesAStateLargerThanItsBound: the state's GET read whatever
// the object held into memory. A state larger than the store's bound is now
// refused, naming the bucket, the key, its size and the bound: from its
// Content-Length before its body is read, or from what was read when the
// store sends none; Lock (whose seal reads the state) fails the same way,
// and a write of such a state sends nothing.
func TestStore_RefusesAStateLargerThanItsBound(t *testing.T) {
	ns := s3test.New(t)
	ctx := t.Context()
	const limit = 1 << 10
	big := append(bytes.Repeat([]byte(" "), 2<<10), "{}\n"...) // 2 KiB and 3 bytes
	key := ns.Name("team/terraform.tfstate")
	if _, err := ns.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	for name, api := range map[string]*s3.Client{
		"with its Content-Length": ns.Client,
		"without Content-Length":  ns.NewClient(t, s3test.WithTransport(withoutContentLength)),
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, ns, "a", api, tfstate.Config{})
			tfstate.SetLimitsForTest(s, limit, nil)
			_, err := s.Read(ctx, tfstate.DefaultWorkspace)
			if !errors.Is(err, tfstate.ErrStateTooLarge) {
				t.Fatalf("Read of a %d-byte state with a bound of %d = %v; want ErrStateTooLarge", len(big), limit, err)
			}
			size := "it is 2051 bytes"
			if api != ns.Client {
				size = "it is more than 1090 bytes" // the bound and the room for a mark
			}
			for _, want := range []string{"s3://" + ns.Bucket + "/" + key, size, "the limit is 1024 bytes"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			if _, err := s.Lock(ctx, tfstate.DefaultWorkspace, "OperationTypeApply"); !errors.Is(err, tfstate.ErrStateTooLarge) {
				t.Errorf("Lock of a state over the bound = %v; want ErrStateTooLarge", err)
			}
		})
	}
	s := newStore(t, ns, "b", nil, tfstate.Config{})
	tfstate.SetLimitsForTest(s, limit, nil)
	for _, ws := range []string{tfstate.DefaultWorkspace, "fresh"} {
		if err := s.Write(ctx, ws, big); !errors.Is(err, tfstate.ErrStateTooLarge) || !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("Write(%s) of a state over the bound = %v; want ErrStateTooLarge, nothing written", ws, err)
		}
	}
	if _, err := ns.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(s.Key("fresh"))}); err == nil {
		t.Error("the refused write of workspace fresh left an object")
	}
}

// withoutContentLength answers GETs without a Content-Length, as a store
// that streams its answer may.
func withoutContentLength(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err == nil && r.Method == http.MethodGet {
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
		}
		return resp, err
	})
}

// TestStore_StateTransfersGetTimeForTheirSize: every Lock rewrites the
// whole state, and every request had the same 30 s, so a large state on a
// slow link could never be locked; and the state's GET had no timeout at
// all. The GET now has the request timeout until the store answers, then
// the timeout for the size it says (the SDK gives the state's PUT the same
// allowance: fence.TestPut_GivesALargeBodyTimeToTravel); a body that stalls
// past it fails the read as unavailable, naming the time and the size,
// while the caller's context goes on.
func TestStore_StateTransfersGetTimeForTheirSize(t *testing.T) {
	for n, want := range map[int64]time.Duration{0: 30 * time.Second, 1 << 20: 38 * time.Second, 64 << 20: 30*time.Second + 512*time.Second} {
		if got := tfstate.TransferTimeout(n); got != want {
			t.Errorf("TransferTimeout(%d) = %s; want %s", n, got, want)
		}
	}
	ns := s3test.New(t)
	ctx := t.Context()
	state := stateJSON("1")
	stall := &stallingBodies{}
	s := newStore(t, ns, "a", ns.NewClient(t, s3test.WithTransport(stall.wrap)), tfstate.Config{})
	if err := s.Write(ctx, tfstate.DefaultWorkspace, state); err != nil {
		t.Fatal(err)
	}
	stored := int64(len(object(t, ns, s.Key(tfstate.DefaultWorkspace))))
	var mu sync.Mutex
	var asked []int64
	tfstate.SetLimitsForTest(s, 0, func(n int64) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, n)
		return 200 * time.Millisecond
	})
	if _, err := s.Read(ctx, tfstate.DefaultWorkspace); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(asked) != 2 || asked[0] != 0 || asked[1] != stored {
		t.Errorf("the GET asked for the timeouts of sizes %v; want [0 %d]: the request's, then the state's", asked, stored)
	}
	mu.Unlock()
	stall.on()
	_, err := s.Read(ctx, tfstate.DefaultWorkspace)
	var te *tfstate.GetTimeoutError
	if !errors.As(err, &te) || !errors.Is(err, s3lock.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("Read of a state whose body stalls = %v; want a *GetTimeoutError matching ErrUnavailable", err)
	}
	if te.Size != stored || te.After != 200*time.Millisecond || !strings.Contains(err.Error(), s.Key(tfstate.DefaultWorkspace)) {
		t.Errorf("the error %q says %d bytes in %s; want %d bytes, 200ms and the key", err, te.Size, te.After, stored)
	}
}

// stallingBodies, once on, answers GETs with a body that sends nothing
// until the request's context ends.
type stallingBodies struct {
	mu      sync.Mutex
	stalled bool
}

func (s *stallingBodies) on() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = true
}

func (s *stallingBodies) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		s.mu.Lock()
		stalled := s.stalled
		s.mu.Unlock()
		if err == nil && stalled && r.Method == http.MethodGet {
			resp.Body = &stalledBody{ctx: r.Context(), body: resp.Body}
		}
		return resp, err
	})
}

type stalledBody struct {
	ctx  context.Context
	body io.ReadCloser
}

func (b *stalledBody) Read([]byte) (int, error) {
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *stalledBody) Close() error { return b.body.Close() }
