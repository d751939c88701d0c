package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Text read from the bucket in Terraform's diagnostics (issue 35): a holder
// that s3lock would not write — escape sequences that set a terminal's
// title and colour, a line break followed by a GitHub Actions workflow
// command, a bidirectional override — put into a lease object by anyone who
// may write the lock's keys, is shown escaped in the diagnostic of a run
// that finds the lock held.

// putHostileHolder writes epoch 1 of the lock name, held for ten minutes by
// a holder with escapes, a line break and a workflow command.
func (e *accEnv) putHostileHolder(t *testing.T, name string) {
	t.Helper()
	body := `{"leaderId":"evil\u001b]0;pwned\u0007\u001b[31m\n::error::forged \u202eevil","validityMs":600000,` +
		`"expired":false,"s3lock":1,"epoch":1,"nonce":"n1"}`
	if _, err := e.ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(e.bucket),
		Key: aws.String(s3lock.Token{Name: name, Epoch: 1}.Key()), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// escapedOnly matches Terraform's output when it shows the holder escaped
// (`evil\x1b]0;pwned\a\x1b[31m\n::error::forged \u202eevil`, quoted again or
// not): its line break written as `\n`, so that "::error::" starts no line,
// and no escape character, bell or bidirectional override anywhere.
var escapedOnly = regexp.MustCompile(`(?s)\A[^\x1b\x07\x{202e}]*x1b\]0;pwned[^\x1b\x07\x{202e}]*\\n::error::forged[^\x1b\x07\x{202e}]*\z`)

func TestAccBucketText_HostileHolderIsShownEscapedInDiagnostics(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("hostile")
	e.putHostileHolder(t, name)
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: e.providerConfig(nil) + fmt.Sprintf(`
resource "s3lock_lease" "blocked" {
  bucket = %q
  name   = %q

  timeouts {
    create = "1s"
  }
}
`, e.bucket, name),
			ExpectError: escapedOnly,
		}},
	})
}

func TestBucketText_EscapedOnlyRefusesRawText(t *testing.T) {
	for _, out := range []string{
		"held by \"evil\x1b]0;pwned\a\x1b[31m\n::error::forged \u202eevil\"",
		`held by "someone else"`,
		"held by `evil\\x1b]0;pwned\\a\\x1b[31m\\n::error::forged \\u202eevil` \x1b[0m",
	} {
		if escapedOnly.MatchString(out) {
			t.Errorf("escapedOnly matches %q", out)
		}
	}
	if out := "│ held by \"evil\\x1b]0;pwned\\a\\x1b[31m\\n::error::forged \\u202eevil\"\n│ next"; !escapedOnly.MatchString(out) {
		t.Errorf("escapedOnly does not match %q", out)
	}
}
