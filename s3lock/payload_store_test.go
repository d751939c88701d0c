package s3lock_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestCorruptLeaseObjects: an epoch object that is not a lease gets a clear
// error naming the bucket and key, from every reader, and ForceRelease can
// replace it.
func TestCorruptLeaseObjects(t *testing.T) {
	t.Parallel()
	huge := append([]byte(`{"leaderId":"x","pad":"`), bytes.Repeat([]byte("a"), s3lock.MaxPayloadBytes)...)
	huge = append(huge, []byte(`"}`)...)
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"not JSON", []byte("hello, world"), "not a JSON object"},
		{"JSON array", []byte(`[1,2,3]`), "not a JSON object"},
		{"truncated JSON", []byte(`{"leaderId":"x",`), "not a lease JSON document"},
		{"wrong types", []byte(`{"leaderId":7,"validityMs":"soon"}`), "not a lease JSON document"},
		{"huge", huge, "bytes"},
		{"negative validity", []byte(`{"leaderId":"x","validityMs":-5000,"expired":false}`), "validityMs is negative"},
		{"absurd validity", []byte(`{"leaderId":"x","validityMs":9000000000000000,"expired":false}`), "longer than a year"},
		{"wrong epoch inside", []byte(`{"leaderId":"x","validityMs":1000,"epoch":7}`), "claims epoch 7"},
		{"future format", []byte(`{"leaderId":"x","validityMs":1000,"s3lock":99}`), "newer s3lock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := s3test.New(t)
			c := newLockClient(t, ns, "reader", nil)
			name := ns.Name("corrupt")
			key := s3lock.Token{Name: name, Epoch: 1}.Key()
			putRaw(t, ns, key, tc.body)
			check := func(call string, err error) {
				t.Helper()
				if !errors.Is(err, s3lock.ErrCorruptLease) {
					t.Fatalf("%s = %v; want ErrCorruptLease", call, err)
				}
				for _, part := range []string{ns.Bucket, key, tc.want} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("%s error %q does not mention %q", call, err, part)
					}
				}
			}
			_, err := c.TryAcquire(t.Context(), name)
			check("TryAcquire", err)
			_, err = c.Acquire(t.Context(), name)
			check("Acquire", err)
			_, err = c.Current(t.Context(), name)
			check("Current", err)
			states, err := c.List(t.Context(), ns.Name(""))
			if err != nil || len(states) != 1 || states[0].Name != name || states[0].Held || states[0].Phase() != s3lock.PhaseUnreadable {
				t.Fatalf("List = %+v, %v; want the lock listed, not held, unreadable", states, err)
			}
			check("List's State.Err", states[0].Err)

			if err := c.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
				t.Fatalf("ForceRelease of the corrupt epoch: %v", err)
			}
			l, err := c.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("TryAcquire after ForceRelease: %v", err)
			}
			mustRelease(t, l)
			if l.Token().Epoch != 2 {
				t.Errorf("epoch = %d; want 2", l.Token().Epoch)
			}
		})
	}
}

// TestSeedFormatIsRead: an epoch object in the article's format (leaderId,
// validityMs, expired) is understood.
func TestSeedFormatIsRead(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "reader", nil)
	name := ns.Name("locks")
	putRaw(t, ns, s3lock.Token{Name: name, Epoch: 1}.Key(), []byte(`{"leaderId":"node-1","validityMs":60000,"expired":false}`))
	_, err := c.TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if !errors.As(err, &held) || held.Holder != "node-1" || held.Epoch != 1 {
		t.Fatalf("TryAcquire over a seed-format lease = %v; want held by node-1", err)
	}
	putRaw(t, ns, s3lock.Token{Name: name, Epoch: 2}.Key(), []byte(`{"leaderId":"node-1","validityMs":0,"expired":true}`))
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil || l.Token().Epoch != 3 {
		t.Fatalf("TryAcquire over a released seed-format lease = %v, %v; want epoch 3", l, err)
	}
	mustRelease(t, l)
}
