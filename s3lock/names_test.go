package s3lock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestValidateName: ValidateName accepts valid lock names and refuses each invalid one with an ErrInvalidName saying why.
func TestValidateName(t *testing.T) {
	valid := []string{"locks", "team/db/migrate", "a", "v1.2_x-y=z+w@h,o:s!t~", strings.Repeat("n", s3lock.MaxNameLength)}
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
		"x/s3lock-probe/y":              "reserved for Verify",
		"s3lock-probe":                  "reserved for Verify",
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
		"x/s3lock-probe/":        "reserved for Verify",
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
		"ForceRelease": func(n string) error { return c.ForceRelease(ctx, n, 1) },
		"Adopt":        func(n string) error { _, err := c.Adopt(ctx, n, 1); return err },
	}
	for call, fn := range calls {
		for _, n := range []string{"", "../outside", "a//b"} {
			if err := fn(n); !errors.Is(err, s3lock.ErrInvalidName) {
				t.Errorf("%s(%q) = %v; want ErrInvalidName", call, n, err)
			}
		}
	}
	if keys := s3test.Keys(t, ns.Client, ns.Bucket, ""); len(keys) != 0 {
		t.Errorf("invalid names wrote %v", keys)
	}
}
