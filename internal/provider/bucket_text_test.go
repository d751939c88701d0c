package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-framework/statestore"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
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
	body := `{"leaderId":` + s3test.HostileTextJSON + `,"validityMs":600000,` +
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

func TestAccBucketText_HostileHolderIsShownEscapedByTheEphemeralLease(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("hostile")
	e.putHostileHolder(t, name)
	tfresource.ParallelTest(t, tfresource.TestCase{
		TerraformVersionChecks:   ephemeralVersions,
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config:      e.providerConfig(nil) + ephemeralLeaseConfig(e.bucket, name, perPhase, `wait_timeout = "1s"`),
			ExpectError: escapedOnly,
		}},
	})
}

// The data source's holder is the bucket's text too: a value in state and
// in outputs, escaped as everywhere else.
func TestAccBucketText_HostileHolderIsEscapedInTheDataSource(t *testing.T) {
	e := newAccEnv(t)
	name := e.name("hostile")
	e.putHostileHolder(t, name)
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: e.providerConfig(nil) + fmt.Sprintf(`
data "s3lock_lease" "hostile" {
  bucket = %q
  name   = %q
}
`, e.bucket, name),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.s3lock_lease.hostile", tfjsonpath.New("holder"),
					knownvalue.StringExact(`evil\x1b]0;pwned\a\x1b[31m\n::error::forged \u202eevil`)),
			},
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

// The state store's "Workspace Already Locked" prints the holder and
// Terraform's lock info (who, operation) that the lock's lease carries:
// text from the bucket, escaped too (the review of issue 35 found the lock
// info printed raw). Called in process, as Terraform's LockState would.
func TestBucketText_StateStoreLockInfoIsShownEscaped(t *testing.T) {
	ns := s3test.New(t)
	key := ns.Name("app/terraform.tfstate")
	c, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("s3lock-provider"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := tfstate.New(ns.Client, c, tfstate.Config{Bucket: ns.Bucket, Key: key, Who: "bob@laptop"})
	if err != nil {
		t.Fatal(err)
	}
	hostile := s3test.HostileTextJSON
	body := `{"leaderId":` + hostile + `,"validityMs":600000,"expired":false,"s3lock":1,"epoch":1,"nonce":"n1",` +
		`"metadata":{"` + tfstate.MetaWho + `":` + hostile + `,"` + tfstate.MetaOperation + `":` + hostile + `}}`
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
		Key: aws.String(s3lock.Token{Name: st.LockName(tfstate.DefaultWorkspace), Epoch: 1}.Key()), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	var resp statestore.LockResponse
	(&stateStore{store: st, waits: &stateWaits{now: time.Now}}).Lock(t.Context(),
		statestore.LockRequest{StateID: tfstate.DefaultWorkspace, Operation: "OperationTypeApply"}, &resp)
	if !resp.Diagnostics.HasError() {
		t.Fatalf("Lock of a held state: %v; want an error", resp.Diagnostics)
	}
	for _, d := range resp.Diagnostics {
		text := d.Summary() + "\n" + d.Detail()
		if strings.ContainsAny(text, "\x1b\a\u202e") || strings.Contains(text, "\n::error::") || !strings.Contains(text, `x1b]0;pwned`) {
			t.Errorf("diagnostic %q; want the holder and lock info shown escaped", text)
		}
	}
}
