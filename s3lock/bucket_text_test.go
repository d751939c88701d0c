package s3lock_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Text read from the bucket (PROTOCOL.md §3): holders, releasedBy, reasons
// and waiter names that s3lock would not write, put there by anyone who may
// write a lock's keys, reach callers escaped, so that printing them cannot
// send a terminal escape sequence or start a line in a CI log.

// hostileJSON is s3test.HostileTextJSON.
const hostileJSON = s3test.HostileTextJSON

// printable fails t if s holds a character that is not graphic (a line
// break, an escape), or lost the text (it is shown escaped, not dropped):
// a field shows hostileJSON's text escaped; a message may quote it again.
func printable(t *testing.T, what, s string) {
	t.Helper()
	if i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) }); i >= 0 {
		t.Errorf("%s = %q: holds %q, which is not printable", what, s, s[i:i+1])
	}
	if !strings.Contains(s, `x1b]0;pwned`) || !strings.Contains(s, `::error::forged`) {
		t.Errorf("%s = %q; want the bucket's text shown escaped", what, s)
	}
}

func TestBucketText_HolderThatIsNotOursIsShownEscaped(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "reader", nil)
	name := ns.Name("hostile-holder")
	putRaw(t, ns, s3lock.Token{Name: name, Epoch: 1}.Key(),
		[]byte(`{"leaderId":`+hostileJSON+`,"validityMs":600000,"expired":false,"s3lock":1,"epoch":1,"nonce":"n1",`+
			`"metadata":{"ok":"plain",`+hostileJSON+`:`+hostileJSON+`}}`))

	_, err := c.TryAcquire(t.Context(), name)
	var held *s3lock.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("TryAcquire = %v; want a HeldError", err)
	}
	if want := `evil\x1b]0;pwned\a\x1b[31m\n::error::forged \u202eevil`; held.Holder != want {
		t.Errorf("HeldError.Holder = %q; want %q", held.Holder, want)
	}
	printable(t, "HeldError.Holder", held.Holder)
	printable(t, "TryAcquire's error", err.Error())

	st, err := c.Current(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	printable(t, "Current().Holder", st.Holder)
	if len(st.Metadata) != 2 || st.Metadata["ok"] != "plain" {
		t.Errorf("Current().Metadata = %q; want ok=plain and the hostile entry, escaped", st.Metadata)
	}
	for k, v := range st.Metadata {
		if k != "ok" {
			printable(t, "a metadata key", k)
			printable(t, "a metadata value", v)
		}
	}
	states, err := c.List(t.Context(), ns.Name(""))
	if err != nil || len(states) != 1 {
		t.Fatalf("List = %v, %v", states, err)
	}
	printable(t, "List()[0].Holder", states[0].Holder)
	_, err = c.Resume(t.Context(), s3lock.Token{Bucket: ns.Bucket, Name: name, Epoch: 1, Nonce: "another"})
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Resume of another acquisition = %v; want ErrLeaseLost", err)
	}
	printable(t, "Resume's error", err.Error())

	// ForceRelease rewrites the object, and keeps what was there: the
	// hostile text is evidence, and escaping it again on every rewrite
	// would double its backslashes.
	if err := c.ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	out, err := ns.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(s3lock.Token{Name: name, Epoch: 1}.Key())})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	var body struct {
		Holder   string            `json:"leaderId"`
		Released bool              `json:"expired"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.NewDecoder(out.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if !body.Released || body.Holder != "evil\x1b]0;pwned\a\x1b[31m\n::error::forged \u202eevil" || len(body.Metadata) != 2 {
		t.Errorf("after ForceRelease the object holds %+v; want it released with the holder and metadata it had", body)
	}
}

func TestBucketText_ReleasedByAndReasonThatAreNotOursAreShownEscaped(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "reader", nil)
	name := ns.Name("hostile-release")
	putRaw(t, ns, s3lock.Token{Name: name, Epoch: 1}.Key(),
		[]byte(`{"leaderId":"a","validityMs":600000,"expired":true,"s3lock":1,"epoch":1,"nonce":"n1",`+
			`"releasedBy":`+hostileJSON+`,"reason":`+hostileJSON+`}`))
	st, err := c.Current(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	printable(t, "Current().ReleasedBy", st.ReleasedBy)
	_, err = c.Resume(t.Context(), s3lock.Token{Bucket: ns.Bucket, Name: name, Epoch: 1, Nonce: "n1"})
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		t.Fatalf("Resume of a force-released lease = %v; want ErrLeaseLost", err)
	}
	printable(t, "Resume's error", err.Error())
}

func TestBucketText_WaiterNameThatIsNotOursIsShownEscaped(t *testing.T) {
	t.Parallel()
	f := newLineFixture(t, "hostile-waiter")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := newLockClient(t, f.ns, "waiter", nil).Acquire(ctx, f.name, s3lock.WithOrder(s3lock.OrderFIFO))
		done <- err
	}()
	key := f.waitLine(t, 1)[0].Key
	cancel() // the waiter leaves the line; its ticket's key is reused below
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter's Acquire = %v; want it cancelled", err)
	}
	putRaw(t, f.ns, key, []byte(`{"leaderId":`+hostileJSON+`,"validityMs":600000,"s3lock":1,"line":true,"order":"fifo","nonce":"n1","write":"w1"}`))
	ws := f.waitLine(t, 1)
	if ws[0].Err != nil {
		t.Fatalf("Line()[0].Err = %v", ws[0].Err)
	}
	printable(t, "Line()[0].Holder", ws[0].Holder)
}

// TestBucketText_MetadataIsHeldToAHoldersRule: metadata is shown to whoever
// reads the lock (status, jq -r on its JSON), so WithMetadata refuses what
// ValidateHolder refuses, and text read back that breaks the rule is
// escaped (above).
func TestBucketText_MetadataIsHeldToAHoldersRule(t *testing.T) {
	t.Parallel()
	ns := s3test.New(t)
	c := newLockClient(t, ns, "writer", nil)
	for _, m := range []map[string]string{{"k": "v\n::error::x"}, {"k\x1b[31m": "v"}, {"k": "\u202ev"}, {"k": "a\tb"}} {
		if _, err := c.TryAcquire(t.Context(), ns.Name("meta"), s3lock.WithMetadata(m)); !errors.Is(err, s3lock.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), "control or format characters") {
			t.Errorf("TryAcquire with metadata %q = %v; want ErrInvalidConfig naming the characters", m, err)
		}
	}
}
