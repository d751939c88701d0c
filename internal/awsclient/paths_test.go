package awsclient_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// Resolved makes every file the options name absolute ("~" is the home
// directory, a relative path the current directory's), takes what the S3
// backend takes from the environment into the options, and leaves the
// caller's options alone.
func TestOptions_Resolved(t *testing.T) {
	isolate(t)
	home := os.Getenv("HOME")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	config := []string{"conf/config", "~/config"}
	in := awsclient.Options{
		CustomCABundle:         "certs/ca.pem",
		SharedConfigFiles:      config,
		SharedCredentialsFiles: []string{"~"},
		AssumeRoleWithWebIdentity: &awsclient.WebIdentity{
			RoleARN: "arn:aws:iam::1:role/w", WebIdentityTokenFile: "./token",
		},
	}
	got, err := in.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.CustomCABundle = filepath.Join(wd, "certs/ca.pem")
	want.SharedConfigFiles = []string{filepath.Join(wd, "conf/config"), filepath.Join(home, "config")}
	want.SharedCredentialsFiles = []string{home}
	want.AssumeRoleWithWebIdentity = &awsclient.WebIdentity{RoleARN: "arn:aws:iam::1:role/w", WebIdentityTokenFile: filepath.Join(wd, "token")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Resolved:\n got %+v\nwant %+v", got, want)
	}
	if config[0] != "conf/config" || in.AssumeRoleWithWebIdentity.WebIdentityTokenFile != "./token" {
		t.Errorf("Resolved changed the caller's options: %v, %+v", config, in.AssumeRoleWithWebIdentity)
	}
	again, err := got.Resolved()
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("resolving twice: %+v, %v; want the same options", again, err)
	}
}

// The settings that fall back to the environment get the environment's
// value, resolved, so that they travel with the options (to the run guard,
// which runs in another directory).
func TestOptions_ResolvedFromTheEnvironment(t *testing.T) {
	isolate(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", "ca.pem")
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/env")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "run/token")
	t.Setenv("AWS_ROLE_SESSION_NAME", "from-env")

	got, err := awsclient.Options{AssumeRoleWithWebIdentity: &awsclient.WebIdentity{}}.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if got.CustomCABundle != filepath.Join(wd, "ca.pem") {
		t.Errorf("CustomCABundle %q, want AWS_CA_BUNDLE made absolute", got.CustomCABundle)
	}
	want := awsclient.WebIdentity{RoleARN: "arn:aws:iam::1:role/env", WebIdentityTokenFile: filepath.Join(wd, "run/token"), SessionName: "from-env"}
	if w := got.AssumeRoleWithWebIdentity; w == nil || !reflect.DeepEqual(*w, want) {
		t.Errorf("web identity %+v, want %+v", w, want)
	}
	// What is set wins; a token excludes the token file of the environment.
	got, err = awsclient.Options{CustomCABundle: "/etc/ca.pem",
		AssumeRoleWithWebIdentity: &awsclient.WebIdentity{RoleARN: "arn:aws:iam::1:role/set", WebIdentityToken: "t"}}.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if w := got.AssumeRoleWithWebIdentity; got.CustomCABundle != "/etc/ca.pem" || w.RoleARN != "arn:aws:iam::1:role/set" ||
		w.WebIdentityTokenFile != "" || w.SessionName != "from-env" {
		t.Errorf("Resolved with settings: %+v, web identity %+v", got, w)
	}
	// Insecure takes no CA bundle from the environment, as before.
	got, err = awsclient.Options{Insecure: true}.Resolved()
	if err != nil || got.CustomCABundle != "" {
		t.Errorf("Insecure: CustomCABundle %q (%v), want none from AWS_CA_BUNDLE", got.CustomCABundle, err)
	}
	// Without a web identity block, AWS_ROLE_ARN stays the SDK's own.
	got, err = awsclient.Options{}.Resolved()
	if err != nil || got.AssumeRoleWithWebIdentity != nil {
		t.Errorf("no web identity: %+v (%v), want none made up", got.AssumeRoleWithWebIdentity, err)
	}
}

// A path with "~" and no home directory is an error that names the setting.
func TestOptions_ResolvedWithoutHome(t *testing.T) {
	isolate(t)
	t.Setenv("HOME", "")
	_, err := awsclient.Options{SharedConfigFiles: []string{"~/config"}}.Resolved()
	if !errors.Is(err, awsclient.ErrInvalidOptions) || !strings.Contains(err.Error(), `shared config file "~/config" starts with ~`) {
		t.Fatalf("got %v, want ErrInvalidOptions naming the setting", err)
	}
}

// Options resolved in one directory reach a store with a private CA from
// another, after a trip through JSON, as the provider's options reach its
// run guard (a regression test: a relative custom CA bundle failed there).
func TestOptions_ResolvedWorkElsewhere(t *testing.T) {
	isolate(t)
	st := s3test.NewTLSStore(t)
	t.Chdir(filepath.Dir(st.CAFile))
	opts := storeOptions(st.Target)
	opts.CustomCABundle, opts.MaxAttempts = filepath.Base(st.CAFile), 1
	resolved, err := opts.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(resolved)
	if err != nil {
		t.Fatal(err)
	}
	var moved awsclient.Options
	if err := json.Unmarshal(raw, &moved); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if _, err := awsclient.New(t.Context(), opts); err == nil || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("unresolved, the relative bundle from another directory: %v; want it not found (else this proves nothing)", err)
	}
	client, err := awsclient.New(t.Context(), moved)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client, st.Bucket)
}

// AbsoluteEnviron makes the relative paths of the AWS variables that name
// files absolute, and leaves everything else as it is.
func TestAbsoluteEnviron(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	in := []string{"AWS_CA_BUNDLE=ca.pem", "AWS_WEB_IDENTITY_TOKEN_FILE=run/token", "AWS_CONFIG_FILE=/etc/aws/config",
		"AWS_SHARED_CREDENTIALS_FILE=~/creds", "AWS_PROFILE=ci", "HOME=home", "EMPTY=", "AWS_CONFIG_FILE="}
	want := []string{"AWS_CA_BUNDLE=" + filepath.Join(wd, "ca.pem"), "AWS_WEB_IDENTITY_TOKEN_FILE=" + filepath.Join(wd, "run/token"),
		"AWS_CONFIG_FILE=/etc/aws/config", "AWS_SHARED_CREDENTIALS_FILE=~/creds", "AWS_PROFILE=ci", "HOME=home", "EMPTY=", "AWS_CONFIG_FILE="}
	if got := awsclient.AbsoluteEnviron(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("AbsoluteEnviron:\n got %q\nwant %q", got, want)
	}
	if in[0] != "AWS_CA_BUNDLE=ca.pem" {
		t.Errorf("AbsoluteEnviron changed its argument: %q", in)
	}
}
