package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// Each way the credentials can be wrong gets its own hint (issue 36): a wrong
// secret key got "check that the credentials may s3:ListBucket", a
// permissions hint for a signature error; with no credentials, an instance
// metadata service that answered 403 turned the credentials hint into that
// permissions hint too; and runtime errors ended with "(see 's3lock status
// --help')".
func TestHints_EachCredentialsProblemGetsItsOwn(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if c.ns.Target.AccessKey == "" {
		t.Skip("needs static credentials (S3LOCK_TEST_ACCESS_KEY) to send a wrong secret with")
	}
	name := c.name("hints")
	// No instance metadata service can run offline: this one answers 403
	// to everything, as the one on this project's CI machines does.
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	t.Cleanup(imds.Close)
	noCreds := append(c.without("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_EC2_METADATA_DISABLED"),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT="+imds.URL)
	policy := s3test.NewEncryptionPolicy(t, c.ns.Target.Endpoint)

	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		says  string
		never string
	}{
		{"wrong secret key", append(c.without("AWS_SECRET_ACCESS_KEY"), "AWS_SECRET_ACCESS_KEY=wrong-secret"),
			[]string{"status", name}, "secret key is not the access key's", "s3:ListBucket"},
		{"unknown access key", append(c.without("AWS_ACCESS_KEY_ID"), "AWS_ACCESS_KEY_ID=AKIAUNKNOWN"+s3test.RandomHex(4)),
			[]string{"status", name}, "does not know this access key", "s3:ListBucket"},
		{"no credentials, metadata service disabled", append(noCreds, "AWS_EC2_METADATA_DISABLED=true"),
			[]string{"status", name}, "found no usable credentials", "s3:ListBucket"},
		{"no credentials, metadata service answers 403", noCreds,
			[]string{"status", name}, "found no usable credentials", "s3:ListBucket"},
		{"missing permission", append(c.without(envEndpoint), envEndpoint+"="+policy.URL),
			[]string{"acquire", "--wait", "0", name}, "may s3:PutObject", "credentials the client uses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.runWith(tc.env, "", tc.args...)
			if r.code != exitError || !strings.Contains(r.stderr, tc.says) || strings.Contains(r.stderr, tc.never) {
				t.Fatalf("s3lock %q: %s; want exit %d saying %q, never %q", tc.args, r, exitError, tc.says, tc.never)
			}
			if strings.Contains(r.stderr, "--help'") {
				t.Errorf("s3lock %q: %q points to --help, which does not help with credentials", tc.args, r.stderr)
			}
		})
	}
}
