package s3lock

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestParsePayload(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		epoch   uint64
		wantErr string
	}{
		{"ours", `{"leaderId":"a","validityMs":1000,"expired":false,"s3lock":1,"epoch":3,"nonce":"n","renewals":2}`, 3, ""},
		{"seed format", `{"leaderId":"node-1","validityMs":60000,"expired":true}`, 9, ""},
		{"unknown fields", `{"leaderId":"a","validityMs":1,"future":{"x":[1,2]}}`, 1, ""},
		{"whitespace", "  \n{\"leaderId\":\"a\"}\n", 1, ""},
		{"empty", ``, 1, "not a JSON object"},
		{"null", `null`, 1, "not a JSON object"},
		{"string", `"x"`, 1, "not a JSON object"},
		{"negative", `{"validityMs":-1}`, 1, "negative"},
		{"too long", `{"validityMs":40000000000000}`, 1, "longer than a year"},
		{"epoch mismatch", `{"epoch":2}`, 1, "claims epoch 2"},
		{"newer format", `{"s3lock":5}`, 1, "newer s3lock"},
		{"shared format without a mode", `{"s3lock":4}`, 1, "shared lease"},
		{"a mode in an older format", `{"s3lock":1,"mode":"shared"}`, 1, "shared lease"},
		{"an unknown mode", `{"s3lock":4,"mode":"exclusive"}`, 1, "shared lease"},
		{"a shared epoch that is pending", `{"s3lock":4,"mode":"shared","pending":true}`, 1, "shared lease"},
		{"a share id that is not ours", `{"s3lock":4,"mode":"shared","share":"../x"}`, 1, "shared lease"},
		{"marker format without slots", `{"s3lock":2}`, 1, "not a marker"},
		{"size-coded marker format without slots", `{"s3lock":3}`, 1, "not a marker"},
		{"slots in a lease's format", `{"s3lock":1,"slots":3}`, 1, "not a marker"},
		{"too many slots", `{"s3lock":2,"slots":65}`, 1, "not a marker"},
		{"invalid utf8", "{\"leaderId\":\"\xff\"}", 1, "not valid UTF-8"},
		{"overflowing number", `{"validityMs":1e400}`, 1, "not a lease JSON document"},
		{"max hold", `{"leaderId":"a","validityMs":1000,"acquiredAt":"2026-01-02T03:04:05Z","maxHoldUntil":"2026-01-02T04:04:05Z"}`, 1, ""},
		{"max hold not after its acquisition", `{"acquiredAt":"2026-01-02T03:04:05Z","maxHoldUntil":"2026-01-02T03:04:05Z"}`, 1,
			"maxHoldUntil 2026-01-02T03:04:05Z is not after acquiredAt"},
		{"oversized", `{"leaderId":"` + string(bytes.Repeat([]byte("x"), maxPayloadBytes)) + `"}`, 1, "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := decodePayload(bytes.NewReader([]byte(tc.in)), tc.epoch)
			if tc.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("decode = %v", err)
				}
				return
			}
			var ce *corruptLeaseError
			if !errors.As(err, &ce) || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
				t.Fatalf("decode = %v; want ErrCorruptLease mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// TestPayload_EveryWriteChangesTheBody: renewals and releases of one lease
// never produce the same body twice (so never the same MD5 ETag).
func TestPayload_EveryWriteChangesTheBody(t *testing.T) {
	p := payload{owner: owner{Holder: "a", ValidityMs: 1000}, Format: formatVersion, Epoch: 1, Nonce: "n", AcquiredAt: time.Unix(0, 0)}
	seen := map[string]bool{}
	for range 100 {
		b, err := p.encode()
		if err != nil {
			t.Fatal(err)
		}
		if seen[string(b)] {
			t.Fatalf("body repeated: %s", b)
		}
		seen[string(b)] = true
		p.Renewals++
	}
	p.Released = true
	b, _ := p.encode()
	if seen[string(b)] {
		t.Fatal("release body equals a renewal body")
	}
}

func FuzzParsePayload(f *testing.F) {
	seeds := []string{
		`{"leaderId":"a","validityMs":1000,"expired":false,"s3lock":1,"epoch":3,"nonce":"n","renewals":2,"metadata":{"k":"v"}}`,
		`{"leaderId":"node-1","validityMs":60000,"expired":true}`,
		`{"acquiredAt":"2026-01-01T00:00:00Z","releasedAt":"bad"}`,
		`{"validityMs":-1}`, `[]`, `{`, ``, `{"epoch":18446744073709551615}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint64(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, epoch uint64) {
		p, err := parsePayload(data, epoch)
		if err != nil {
			var ce *corruptLeaseError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not an unreadable lease (ErrCorruptLease)", err)
			}
			return
		}
		if p.ValidityMs < 0 || p.validity() > maxForeignValidity || (epoch != 0 && p.Epoch != 0 && p.Epoch != epoch) {
			t.Fatalf("accepted an invalid payload: %+v", p)
		}
		// What was accepted re-encodes and reads back the same.
		b, err := p.encode()
		if err != nil {
			if len(data) <= maxPayloadBytes/2 {
				t.Fatalf("re-encoding an accepted payload: %v", err)
			}
			return
		}
		q, err := parsePayload(b, epoch)
		if err != nil || q.Holder != p.Holder || q.ValidityMs != p.ValidityMs || q.Released != p.Released ||
			q.Nonce != p.Nonce || q.Renewals != p.Renewals {
			t.Fatalf("round trip changed %+v into %+v (%v)", p, q, err)
		}
	})
}
