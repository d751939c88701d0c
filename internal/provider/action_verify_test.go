package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// verifyConfig is the s3lock_verify action block "x" on bucket; provider,
// when set, is the alias of the provider configuration it uses, and extra
// holds further arguments of its config block (raw HCL lines).
func verifyConfig(provider, bucket string, extra ...string) string {
	var b strings.Builder
	b.WriteString("action \"s3lock_verify\" \"x\" {\n")
	if provider != "" {
		fmt.Fprintf(&b, "  provider = s3lock.%s\n", provider)
	}
	fmt.Fprintf(&b, "  config {\n    bucket = %q\n", bucket)
	for _, l := range extra {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// keysUnder lists the keys under prefix in the env's bucket.
func (e *accEnv) keysUnder(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := e.ns.Client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(e.bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(out.Contents))
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// TestAccVerifyAction_Checks: `terraform apply -invoke` runs the store
// checks under the prefix, reporting each as a progress message; the probe
// object is deleted again and only the probe lock's epochs stay, under the
// prefix. The action also runs before a resource as an action_trigger
// (Terraform 1.14 and later).
func TestAccVerifyAction_Checks(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.Actions)
	prefix, guarded := e.name("deploy/"), e.name("deploy/prod")
	// The documented example, on the test's bucket.
	h, dir := cliWorkdir(t, e, example(t, "actions/s3lock_verify/action.tf", `"acme-locks"`, fmt.Sprintf("%q", e.bucket),
		`"deploy/"`, fmt.Sprintf("%q", prefix), `"deploy/prod"`, fmt.Sprintf("%q", guarded)), tfharness.Actions)

	action := "action.s3lock_verify.deploy_locks"
	out, err := h.Invoke(t.Context(), dir, action)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	probes := prefix + "s3lock-probe/"
	wantOutput(t, "verify", out,
		fmt.Sprintf(`Checking bucket %q, with probes under s3://%s/%s.`, e.bucket, e.bucket, probes),
		"conditional writes: ok: If-None-Match and If-Match are enforced",
		"listing order: ok: pages follow the key order, StartAfter honoured",
		`list \(s3:ListBucket\): ok`, `get \(s3:GetObject\): ok`, `put \(s3:PutObject\): ok`, `delete \(s3:DeleteObject\): ok`,
		fmt.Sprintf(`Bucket %q passed all 6 checks.`, e.bucket),
		"Action complete: "+action)
	keys := e.keysUnder(t, e.name(""))
	if len(keys) == 0 {
		t.Fatal("the checks left no probe lock")
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, probes+"permissions/lock-") {
			t.Errorf("after the checks, %s is in the bucket; want only the epochs of %spermissions", k, probes)
		}
	}

	// As an action_trigger, before the lease is created.
	out, err = h.Run(t.Context(), dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantOutput(t, "apply with the action as a trigger", out,
		`Action started: `+action+` \(triggered by s3lock_lease.deploy\)`,
		"passed all 6 checks", "s3lock_lease.deploy: Creation complete", "Actions: 1 invoked.")
	if st := e.current(t, guarded); !st.Held {
		t.Errorf("after the apply, %q is %s; want held", guarded, st.Phase())
	}
	if out, err := h.Run(t.Context(), dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestAccVerifyAction_Fails: the action fails, naming each check that did
// not pass and what to do, when the credentials may not use the bucket; and
// a prefix that is not a path is refused before anything runs (Terraform
// 1.14 and later).
func TestAccVerifyAction_Fails(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.Actions)
	denier, denying := newOutageProxy(t, e.ns.Target.Endpoint)
	denier.deny.Store(true)
	denied := e.providerBlock(map[string]string{"alias": `"denied"`, "endpoints": fmt.Sprintf("{ s3 = %q }", denying)})
	h, dir := cliWorkdir(t, e, denied, tfharness.Actions)
	cases := []struct {
		name, config string
		want         []string
	}{
		{
			name:   "access denied",
			config: verifyConfig("denied", e.bucket),
			want: []string{"Store check failed", fmt.Sprintf(`Bucket %q`, e.bucket), "checks did not pass",
				`list \(s3:ListBucket\): denied`, "lack a permission", "s3:ListBucket"},
		},
		{
			name:   "prefix that is not a path",
			config: verifyConfig("", e.bucket, `prefix = "team"`),
			want:   []string{"Invalid prefix", `Prefix "team"`, "must end with a slash", `"locks/"`},
		},
		{
			name:   "bad bucket",
			config: verifyConfig("", "Not_A_Bucket"),
			want:   []string{"Invalid bucket name", "Not_A_Bucket"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writeWorkFile(t, dir, "action.tf", tc.config)
			out, err := h.Invoke(t.Context(), dir, "action.s3lock_verify.x")
			if err == nil {
				t.Fatalf("the checks passed:\n%s", out)
			}
			wantOutput(t, tc.name, out, tc.want...)
			if keys := e.keysUnder(t, e.name("")); len(keys) != 0 {
				t.Errorf("the failed checks wrote %v", keys)
			}
		})
	}
}

// TestAccVerifyAction_RefusesAStoreThatIgnoresConditionalWrites: on s3rver,
// a real S3 emulator that accepts If-None-Match and If-Match and ignores
// them, the action fails naming the conditional-write check (Terraform 1.14
// and later; s3rver as installed by make stores, or from the npm registry
// with S3LOCK_TEST_S3RVER=1).
func TestAccVerifyAction_RefusesAStoreThatIgnoresConditionalWrites(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.Actions)
	st := s3test.StartStore(t, s3server.S3rver, "")
	const bucket = "s3lock-ignoring"
	if _, err := s3server.NewClient(st, nil).CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	creds := st.Credentials()
	ignoring := e.providerBlock(map[string]string{
		"alias":          `"ignoring"`,
		"endpoints":      fmt.Sprintf("{ s3 = %q }", st.URL()),
		"access_key":     fmt.Sprintf("%q", creds.AccessKeyID),
		"secret_key":     fmt.Sprintf("%q", creds.SecretAccessKey),
		"use_path_style": "true",
	})
	h, dir := cliWorkdir(t, e, ignoring, tfharness.Actions)
	writeWorkFile(t, dir, "action.tf", verifyConfig("ignoring", bucket))
	out, err := h.Invoke(t.Context(), dir, "action.s3lock_verify.x")
	if err == nil {
		t.Fatalf("the checks passed on a store that ignores conditional writes:\n%s", out)
	}
	wantOutput(t, "s3rver", out, "Store check failed", fmt.Sprintf(`Bucket %q`, bucket), "conditional writes: failed",
		"does not enforce S3 conditional writes")
}
