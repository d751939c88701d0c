package tfstate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// A Terraform state as Terraform writes it (what the store gets to write).
func stateJSON(serial string) []byte {
	return []byte("{\n  \"version\": 4,\n  \"serial\": " + serial + ",\n  \"lineage\": \"l\",\n  \"resources\": []\n}\n")
}

// newStore is one Terraform process's store on ns (its own s3lock client
// and holder), with api as its S3 client (ns.Client if nil).
func newStore(t *testing.T, ns *s3test.Namespace, holder string, api *s3.Client, cfg tfstate.Config) *tfstate.Store {
	t.Helper()
	if api == nil {
		api = ns.Client
	}
	c, err := s3lock.New(api, ns.Bucket, s3lock.WithHolder(holder))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bucket = ns.Bucket
	if cfg.Key == "" {
		cfg.Key = ns.Name("team/terraform.tfstate")
	}
	s, err := tfstate.New(api, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func object(t *testing.T, ns *s3test.Namespace, key string) []byte {
	t.Helper()
	out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("reading s3://%s/%s: %v", ns.Bucket, key, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return b
}

func lock(t *testing.T, s *tfstate.Store, ws string) string {
	t.Helper()
	id, err := s.Lock(t.Context(), ws, "OperationTypeApply")
	if err != nil {
		t.Fatalf("Lock(%s): %v", ws, err)
	}
	return id
}

func TestStore_KeepsStatesWhereTheS3BackendDoes(t *testing.T) {
	ns := s3test.New(t)
	s := newStore(t, ns, "a", nil, tfstate.Config{})
	key := ns.Name("team/terraform.tfstate")
	if got := s.Key("default"); got != key {
		t.Errorf("default workspace's key = %q, want %q", got, key)
	}
	if got, want := s.Key("dev"), "env:/dev/"+key; got != want {
		t.Errorf("workspace dev's key = %q, want %q", got, want)
	}
	if got, want := s.LockName("dev"), "env:/dev/"+key+".s3lock"; got != want {
		t.Errorf("workspace dev's lock = %q, want %q", got, want)
	}
	for _, ws := range []string{"dev", "prod"} {
		id := lock(t, s, ws)
		if err := s.Write(t.Context(), ws, stateJSON("1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(t.Context(), ws, id); err != nil {
			t.Fatal(err)
		}
	}
	// The S3 backend's layout: a state that is not this configuration's
	// key is not a workspace of it.
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
		Key: aws.String("env:/other/" + ns.Name("elsewhere.tfstate")), Body: strings.NewReader("{}")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Workspaces(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "default,dev,prod" {
		t.Errorf("Workspaces = %v, want [default dev prod]", got)
	}
	if err := s.Delete(t.Context(), "dev"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Workspaces(t.Context()); strings.Join(got, ",") != "default,prod" {
		t.Errorf("after deleting dev, Workspaces = %v, want [default prod]", got)
	}
	if err := s.Delete(t.Context(), "default"); err == nil {
		t.Error("deleting the default workspace succeeded")
	}
}

func TestStore_ReadsBackWhatItWroteAndWhatTheS3BackendWrote(t *testing.T) {
	ns := s3test.New(t)
	s := newStore(t, ns, "a", nil, tfstate.Config{})
	if got, err := s.Read(t.Context(), "default"); err != nil || got != nil {
		t.Fatalf("Read of a state never written = %q, %v; want nil (no state)", got, err)
	}
	id := lock(t, s, "default")
	// The lock's seal of an absent state is a placeholder: still no state.
	if got, err := s.Read(t.Context(), "default"); err != nil || got != nil {
		t.Fatalf("Read under a fresh lock = %q, %v; want nil (no state)", got, err)
	}
	if err := s.Write(t.Context(), "default", stateJSON("1")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Read(t.Context(), "default"); !bytes.Equal(got, stateJSON("1")) {
		t.Errorf("Read = %q, want what was written", got)
	}
	if err := s.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	// Stored: the state, then its fence mark (whitespace JSON ignores).
	stored := object(t, ns, s.Key("default"))
	if !bytes.HasPrefix(stored, bytes.TrimRight(stateJSON("1"), "\n")) || strings.Trim(string(stored[len(stateJSON("1"))-1:]), " \t\n") != "" {
		t.Errorf("stored body = %q, want the state followed by whitespace only", stored)
	}
	// What the S3 backend writes (no mark) reads as it is.
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
		Key: aws.String(s.Key("default")), Body: bytes.NewReader(stateJSON("7"))}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Read(t.Context(), "default"); !bytes.Equal(got, stateJSON("7")) {
		t.Errorf("Read of the S3 backend's state = %q, want it unchanged", got)
	}
}

// A paused run whose lease was force-released (or lapsed) wakes up and
// writes: the write must not land once a newer run has locked, whether it
// starts after the newer lock or was already on its way.
func TestStore_AStaleRunsWriteNeverLandsAfterANewerRunLocked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing bool // a state exists before the first run
		inFlight bool // the stale PUT was sent before the newer run locked
	}{
		{"state exists, write starts after the takeover", true, false},
		{"state exists, write already in flight", true, true},
		{"no state yet, write starts after the takeover", false, false},
		{"no state yet, write already in flight", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := s3test.New(t)
			gate := &putGate{}
			stale := newStore(t, ns, "paused", ns.NewClient(t, s3test.WithTransport(gate.wrap)), tfstate.Config{})
			newer := newStore(t, ns, "newer", nil, tfstate.Config{})
			ctx := t.Context()
			if tc.existing {
				id := lock(t, newer, "default")
				if err := newer.Write(ctx, "default", stateJSON("1")); err != nil {
					t.Fatal(err)
				}
				if err := newer.Unlock(ctx, "default", id); err != nil {
					t.Fatal(err)
				}
			}
			staleID := lock(t, stale, "default")
			if _, err := stale.Read(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			var staleErr error
			var wg sync.WaitGroup
			if tc.inFlight {
				// The stale run's next PUT is held at the network until
				// the newer run has locked.
				gate.hold()
				wg.Go(func() { staleErr = stale.Write(ctx, "default", stateJSON(`"stale"`)) })
				gate.waitHeld(t)
			}
			// Someone force-unlocks the paused run; a newer run locks.
			if err := newer.Unlock(ctx, "default", staleID); err != nil {
				t.Fatalf("force-unlock %s: %v", staleID, err)
			}
			newID := lock(t, newer, "default")
			if newID == staleID {
				t.Fatalf("the newer run got the stale run's lock ID %s", newID)
			}
			if tc.inFlight {
				gate.release()
				wg.Wait()
			} else {
				staleErr = stale.Write(ctx, "default", stateJSON(`"stale"`))
			}
			var swe *tfstate.StaleWriteError
			if !errors.As(staleErr, &swe) {
				t.Fatalf("the stale run's write: %v; want a *tfstate.StaleWriteError", staleErr)
			}
			if got, _ := newer.Read(ctx, "default"); bytes.Contains(got, []byte("stale")) {
				t.Fatalf("the stale write landed: the state is %q", got)
			}
			// The newer run writes and its state stays.
			if err := newer.Write(ctx, "default", stateJSON("2")); err != nil {
				t.Fatalf("the newer run's write: %v", err)
			}
			if err := newer.Unlock(ctx, "default", newID); err != nil {
				t.Fatal(err)
			}
			if got, _ := newer.Read(ctx, "default"); !bytes.Equal(got, stateJSON("2")) {
				t.Errorf("state = %q, want the newer run's", got)
			}
		})
	}
}

func TestStore_LockWaitsAndTellsWhoHoldsIt(t *testing.T) {
	ns := s3test.New(t)
	a := newStore(t, ns, "run-a", nil, tfstate.Config{Who: "alice@laptop"})
	b := newStore(t, ns, "run-b", nil, tfstate.Config{})
	id := lock(t, a, "default")
	_, err := b.Lock(t.Context(), "default", "OperationTypePlan")
	var held *s3lock.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Lock of a held state: %v; want a *s3lock.HeldError", err)
	}
	if tfstate.LockID(held.Epoch) != id || held.Metadata[tfstate.MetaOperation] != "OperationTypeApply" ||
		held.Metadata[tfstate.MetaWho] != "alice@laptop" || held.Holder != "run-a" {
		t.Errorf("HeldError = epoch %d, holder %q, metadata %v; want lock ID %s, run-a, apply by alice@laptop",
			held.Epoch, held.Holder, held.Metadata, id)
	}
	// With a wait, the second run gets the lock once the first unlocks.
	waiting := newStore(t, ns, "run-c", nil, tfstate.Config{Wait: time.Minute, Order: s3lock.OrderFIFO})
	observer, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		id, err := waiting.Lock(t.Context(), "default", "OperationTypeApply")
		if err == nil {
			err = waiting.Unlock(context.WithoutCancel(t.Context()), "default", id)
		}
		got <- err
	}()
	testkit.Eventually(t, 30*time.Second, "the third run to queue", func() bool {
		line, err := observer.Line(t.Context(), waiting.LockName("default"))
		return err == nil && len(line) == 1
	})
	if err := a.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiting run: %v", err)
	}
}

func TestStore_ForceUnlockTakesOnlyTheCurrentLockID(t *testing.T) {
	ns := s3test.New(t)
	a := newStore(t, ns, "a", nil, tfstate.Config{})
	other := newStore(t, ns, "operator", nil, tfstate.Config{})
	id := lock(t, a, "default")
	var nc *tfstate.NotCurrentError
	if err := other.Unlock(t.Context(), "default", id+"0"); !errors.As(err, &nc) {
		t.Errorf("force-unlock of an ID that is not current: %v; want a *tfstate.NotCurrentError", err)
	}
	if err := other.Unlock(t.Context(), "default", "not-an-id"); err == nil || !strings.Contains(err.Error(), "not the ID") {
		t.Errorf("force-unlock of a malformed ID: %v", err)
	}
	if err := other.Unlock(t.Context(), "default", id); err != nil {
		t.Fatalf("force-unlock %s: %v", id, err)
	}
	if err := other.Unlock(t.Context(), "default", id); err != nil {
		t.Errorf("force-unlock of a lock already released: %v; want nothing to do", err)
	}
	id2 := lock(t, other, "default") // free again
	third := newStore(t, ns, "operator-2", nil, tfstate.Config{})
	if err := third.Unlock(t.Context(), "default", id); !errors.As(err, &nc) {
		t.Errorf("force-unlock of an older lease while a newer one holds: %v; want a *tfstate.NotCurrentError", err)
	}
	if err := other.Unlock(t.Context(), "default", id2); err != nil {
		t.Fatal(err)
	}
	// The first holder's own unlock now reports the lease it lost.
	if err := a.Unlock(t.Context(), "default", id); err == nil {
		t.Error("unlocking a force-released lease reported success")
	}
}

func TestStore_RefusesKeysTheS3BackendRefuses(t *testing.T) {
	for _, key := range []string{"", "/a.tfstate", "a/", "a//b"} {
		if err := tfstate.ValidateKey(key); !errors.Is(err, tfstate.ErrInvalidConfig) {
			t.Errorf("ValidateKey(%q) = %v; want ErrInvalidConfig", key, err)
		}
	}
	for _, p := range []string{"/env", "env/", "a//b"} {
		if err := tfstate.ValidateWorkspaceKeyPrefix(p); !errors.Is(err, tfstate.ErrInvalidConfig) {
			t.Errorf("ValidateWorkspaceKeyPrefix(%q) = %v; want ErrInvalidConfig", p, err)
		}
	}
}

// putGate holds a client's PutObject requests at the network while closed.
type putGate struct {
	mu      sync.Mutex
	closed  chan struct{} // nil: open
	arrived chan struct{}
}

func (g *putGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.arrived = make(chan struct{}), make(chan struct{}, 1)
}

func (g *putGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.closed)
	g.closed = nil
}

func (g *putGate) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the held PUT never came")
	}
}

func (g *putGate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "terraform.tfstate") {
			g.mu.Lock()
			closed, arrived := g.closed, g.arrived
			g.mu.Unlock()
			if closed != nil {
				arrived <- struct{}{}
				<-closed
			}
		}
		return next.RoundTrip(req)
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// What the fence does not let through besides a stale lease: a write over
// bytes someone else wrote since, a write of a lease that ran out or that
// was left to lapse because Terraform went.
func TestStore_RefusesWritesItCannotFence(t *testing.T) {
	ctx := t.Context()
	t.Run("over bytes written since without s3lock", func(t *testing.T) {
		ns := s3test.New(t)
		s := newStore(t, ns, "a", nil, tfstate.Config{})
		lock(t, s, "default")
		if _, err := ns.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(s.Key("default")),
			Body: bytes.NewReader(stateJSON(`"by hand"`))}); err != nil {
			t.Fatal(err)
		}
		// Reading them does not make them this holder's to overwrite.
		if got, _ := s.Read(ctx, "default"); !bytes.Equal(got, stateJSON(`"by hand"`)) {
			t.Fatalf("Read = %q", got)
		}
		var swe *tfstate.StaleWriteError
		if err := s.Write(ctx, "default", stateJSON("2")); !errors.As(err, &swe) || !errors.Is(err, fence.ErrObjectChanged) {
			t.Fatalf("Write over someone else's bytes: %v; want a *StaleWriteError matching ErrObjectChanged", err)
		}
		if got, _ := s.Read(ctx, "default"); !bytes.Equal(got, stateJSON(`"by hand"`)) {
			t.Errorf("the state is %q; want the other writer's kept", got)
		}
	})
	t.Run("of a stale lease, around writes without the lock (-lock=false)", func(t *testing.T) {
		ns := s3test.New(t)
		a := newStore(t, ns, "a", nil, tfstate.Config{})
		b := newStore(t, ns, "b", nil, tfstate.Config{})
		unlocked := newStore(t, ns, "u", nil, tfstate.Config{})
		idA := lock(t, a, "default")
		if err := unlocked.Write(ctx, "default", stateJSON(`"u"`)); err != nil {
			t.Fatalf("a write without the lock: %v", err)
		}
		if got, _ := a.Read(ctx, "default"); !bytes.Equal(got, stateJSON(`"u"`)) {
			t.Fatalf("Read = %q", got)
		}
		if err := b.Unlock(ctx, "default", idA); err != nil { // force-unlock
			t.Fatal(err)
		}
		lock(t, b, "default")
		if err := unlocked.Write(ctx, "default", stateJSON(`"u"`)); err != nil { // the same bytes again
			t.Fatal(err)
		}
		if err := a.Write(ctx, "default", stateJSON(`"stale"`)); err == nil {
			t.Fatal("the stale run's write landed")
		}
		if got, _ := b.Read(ctx, "default"); !bytes.Equal(got, stateJSON(`"u"`)) {
			t.Errorf("the state is %q; want the last write without the lock kept", got)
		}
	})
	t.Run("of a lease that ran out by the holder's clock", func(t *testing.T) {
		ns := s3test.New(t)
		var skew time.Duration
		s := newStore(t, ns, "a", nil, tfstate.Config{Now: func() time.Time { return time.Now().Add(skew) }})
		lock(t, s, "default")
		skew = time.Hour
		if err := s.Write(ctx, "default", stateJSON("1")); !errors.Is(err, tfstate.ErrLeaseRanOut) {
			t.Fatalf("Write after the lease ran out: %v; want ErrLeaseRanOut", err)
		}
	})
	t.Run("after Terraform went away", func(t *testing.T) {
		ns := s3test.New(t)
		gone := make(chan struct{})
		s := newStore(t, ns, "a", nil, tfstate.Config{Gone: gone})
		id := lock(t, s, "default")
		close(gone)
		// Writes may land until the store sees Terraform gone; none after.
		testkit.Eventually(t, 10*time.Second, "the lease to be abandoned", func() bool {
			return errors.Is(s.Write(ctx, "default", stateJSON("1")), tfstate.ErrAbandoned)
		})
		before, _ := s.Read(ctx, "default")
		if err := s.Write(ctx, "default", stateJSON("2")); !errors.Is(err, tfstate.ErrAbandoned) {
			t.Fatalf("a write after the abandon: %v; want ErrAbandoned", err)
		}
		// Left to lapse, not released: the lock is still held for now.
		c, err := s3lock.New(ns.Client, ns.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := c.Current(ctx, s.LockName("default")); err != nil || st.Phase() != s3lock.PhaseHeld || tfstate.LockID(st.Epoch) != id {
			t.Errorf("the abandoned lock is %+v (%v); want lock ID %s still held, to lapse", st, err, id)
		}
		if got, _ := s.Read(ctx, "default"); !bytes.Equal(got, before) {
			t.Errorf("the state is %q; want it as it was before the refused write, %q", got, before)
		}
	})
}

func TestStore_DeleteTakesTheWorkspacesLock(t *testing.T) {
	ns := s3test.New(t)
	a := newStore(t, ns, "a", nil, tfstate.Config{})
	b := newStore(t, ns, "b", nil, tfstate.Config{})
	id := lock(t, a, "dev")
	if err := a.Write(t.Context(), "dev", stateJSON("1")); err != nil {
		t.Fatal(err)
	}
	var held *s3lock.HeldError
	if err := b.Delete(t.Context(), "dev"); !errors.As(err, &held) {
		t.Fatalf("deleting a workspace another run holds: %v; want a *s3lock.HeldError", err)
	}
	if got, _ := b.Read(t.Context(), "dev"); !bytes.Equal(got, stateJSON("1")) {
		t.Fatalf("the held workspace's state is %q; want it kept", got)
	}
	if err := a.Unlock(t.Context(), "dev", id); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(t.Context(), "dev"); err != nil {
		t.Fatalf("deleting a free workspace: %v", err)
	}
	if got, _ := b.Workspaces(t.Context()); strings.Join(got, ",") != "default" {
		t.Errorf("Workspaces = %v; want [default]", got)
	}
}

// A write that lands between Lock's read of the state and its seal (here,
// one without the lock) makes the seal read again and seal what is there:
// the lock is had, and the other write is kept, marked.
func TestStore_SealReadsAgainWhenTheStateChangesUnderIt(t *testing.T) {
	ns := s3test.New(t)
	var once sync.Once
	interloper := newStore(t, ns, "u", nil, tfstate.Config{})
	var interloperErr error
	hook := func(next http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "terraform.tfstate") {
				once.Do(func() { interloperErr = interloper.Write(req.Context(), "default", stateJSON(`"between"`)) })
			}
			return resp, err
		})
	}
	s := newStore(t, ns, "a", ns.NewClient(t, s3test.WithTransport(hook)), tfstate.Config{})
	id := lock(t, s, "default")
	if interloperErr != nil {
		t.Fatal(interloperErr)
	}
	body := object(t, ns, s.Key("default"))
	if !bytes.HasPrefix(body, bytes.TrimRight(stateJSON(`"between"`), "\n")) || bytes.Equal(body, stateJSON(`"between"`)) {
		t.Errorf("after the lock the state object is %q; want the other write, sealed (marked)", body)
	}
	if err := s.Write(t.Context(), "default", stateJSON("2")); err != nil {
		t.Fatalf("the holder's write after the re-read seal: %v", err)
	}
	if err := s.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
}
