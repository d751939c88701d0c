package awsclient_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ssocreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// The assumed roles go through s3test's local STS (no real STS runs
// offline): it checks the role and the token and hands out the local
// server's credentials, so a round trip to the server proves that the S3
// client signs with what STS returned.

const (
	webRole   = "arn:aws:iam::123456789012:role/ci-locks"
	chainRole = "arn:aws:iam::210987654321:role/locks"
	ciToken   = "eyJhbGciOiJSUzI1NiJ9.ci-token.signature"
)

func newSTS(t *testing.T, tg s3test.Target) *s3test.STS {
	t.Helper()
	return s3test.NewSTS(t, s3test.STSConfig{Roles: []string{webRole, chainRole}, WebIdentityToken: ciToken,
		AccessKey: tg.AccessKey, SecretKey: tg.SecretKey})
}

// writeToken writes ciToken to a file and returns its name.
func writeToken(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(ciToken), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkForm compares parameters of an STS call.
func checkForm(t *testing.T, call s3test.STSCall, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := call.Form.Get(k); got != v {
			t.Errorf("STS %s got %s=%q, want %q (all: %v)", call.Action, k, got, v, call.Form)
		}
	}
}

func TestNew_AssumeRoleWithWebIdentity(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	base := awsclient.Options{Region: tg.Region, Endpoint: tg.Endpoint, UsePathStyle: true}

	t.Run("token file and session settings", func(t *testing.T) {
		sts := newSTS(t, tg)
		opts := base
		opts.STSEndpoint = sts.URL
		opts.AssumeRoleWithWebIdentity = &awsclient.WebIdentity{
			RoleARN: webRole, WebIdentityTokenFile: writeToken(t), SessionName: "pipeline-7",
			Duration: 20 * time.Minute, Policy: `{"Version":"2012-10-17","Statement":[]}`,
			PolicyARNs: []string{"arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"},
		}
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, ns.Bucket)
		calls := sts.Calls("AssumeRoleWithWebIdentity")
		if len(calls) != 1 || calls[0].Status != http.StatusOK {
			t.Fatalf("STS calls %+v, want one successful AssumeRoleWithWebIdentity", sts.Calls(""))
		}
		checkForm(t, calls[0], map[string]string{"RoleArn": webRole, "WebIdentityToken": ciToken,
			"RoleSessionName": "pipeline-7", "DurationSeconds": "1200", "Policy": opts.AssumeRoleWithWebIdentity.Policy,
			"PolicyArns.member.1.arn": "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"})
		if calls[0].AccessKey != "" {
			t.Errorf("AssumeRoleWithWebIdentity was signed with %q; it needs no credentials", calls[0].AccessKey)
		}
	})

	t.Run("token value", func(t *testing.T) {
		sts := newSTS(t, tg)
		opts := base
		opts.STSEndpoint = sts.URL
		opts.AssumeRoleWithWebIdentity = &awsclient.WebIdentity{RoleARN: webRole, WebIdentityToken: ciToken}
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, ns.Bucket)
		checkForm(t, sts.Calls("AssumeRoleWithWebIdentity")[0], map[string]string{"WebIdentityToken": ciToken,
			"RoleSessionName": awsclient.DefaultSessionName})
	})

	t.Run("from the environment", func(t *testing.T) {
		sts := newSTS(t, tg)
		t.Setenv(awsclient.EnvRoleARN, webRole)
		t.Setenv(awsclient.EnvWebIdentityTokenFile, writeToken(t))
		t.Setenv(awsclient.EnvRoleSessionName, "from-env")
		opts := base
		opts.STSEndpoint = sts.URL
		opts.AssumeRoleWithWebIdentity = &awsclient.WebIdentity{}
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, ns.Bucket)
		checkForm(t, sts.Calls("AssumeRoleWithWebIdentity")[0], map[string]string{"RoleArn": webRole,
			"WebIdentityToken": ciToken, "RoleSessionName": "from-env"})
	})

	t.Run("then assume_role", func(t *testing.T) {
		sts := newSTS(t, tg)
		opts := base
		opts.STSEndpoint = sts.URL
		opts.AssumeRoleWithWebIdentity = &awsclient.WebIdentity{RoleARN: webRole, WebIdentityToken: ciToken}
		opts.AssumeRole = &awsclient.AssumeRole{RoleARN: chainRole, SessionName: "chained"}
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, ns.Bucket)
		calls := sts.Calls("")
		if len(calls) != 2 || calls[0].Action != "AssumeRoleWithWebIdentity" || calls[1].Action != "AssumeRole" {
			t.Fatalf("STS calls %+v, want AssumeRoleWithWebIdentity then AssumeRole", calls)
		}
		// No other credentials exist: AssumeRole is signed with the web
		// identity's.
		if calls[1].AccessKey != tg.AccessKey {
			t.Errorf("AssumeRole signed with %q, want the web identity's credentials %q", calls[1].AccessKey, tg.AccessKey)
		}
		checkForm(t, calls[1], map[string]string{"RoleArn": chainRole, "RoleSessionName": "chained"})
	})

	t.Run("wrong token", func(t *testing.T) {
		sts := newSTS(t, tg)
		opts := base
		opts.STSEndpoint, opts.MaxAttempts = sts.URL, 1
		opts.AssumeRoleWithWebIdentity = &awsclient.WebIdentity{RoleARN: webRole, WebIdentityToken: "forged"}
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(ns.Bucket)})
		if err == nil || !strings.Contains(err.Error(), "InvalidIdentityToken") {
			t.Fatalf("got %v, want STS's InvalidIdentityToken", err)
		}
		if strings.Contains(err.Error(), "forged") {
			t.Errorf("the error shows the token: %v", err)
		}
	})
}

// AssumeRole passes every session setting of the S3 backend's assume_role
// block to STS, and the S3 client signs with the role's credentials.
func TestNew_AssumeRole(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	sts := newSTS(t, tg)
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`
	client, err := awsclient.New(t.Context(), awsclient.Options{
		Region: tg.Region, AccessKey: "base-key", SecretKey: "base-secret",
		Endpoint: tg.Endpoint, UsePathStyle: true, STSEndpoint: sts.URL,
		AssumeRole: &awsclient.AssumeRole{
			RoleARN: chainRole, SessionName: "ci", ExternalID: "ext-1", Duration: 30 * time.Minute,
			Policy: policy, PolicyARNs: []string{"arn:aws:iam::aws:policy/ReadOnlyAccess"},
			Tags: map[string]string{"team": "platform"}, TransitiveTagKeys: []string{"team"},
			SourceIdentity: "alice",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client, ns.Bucket)

	calls := sts.Calls("AssumeRole")
	if len(calls) != 1 {
		t.Fatalf("STS calls %+v, want one AssumeRole", sts.Calls(""))
	}
	if calls[0].AccessKey != "base-key" {
		t.Errorf("AssumeRole signed with %q, want the base credentials", calls[0].AccessKey)
	}
	checkForm(t, calls[0], map[string]string{
		"RoleArn": chainRole, "RoleSessionName": "ci", "ExternalId": "ext-1", "DurationSeconds": "1800",
		"Policy": policy, "PolicyArns.member.1.arn": "arn:aws:iam::aws:policy/ReadOnlyAccess",
		"Tags.member.1.Key": "team", "Tags.member.1.Value": "platform", "TransitiveTagKeys.member.1": "team",
		"SourceIdentity": "alice",
	})
}

// The roles the SDK assumes by itself, for AWS_ROLE_ARN with
// AWS_WEB_IDENTITY_TOKEN_FILE and for a profile's role_arn, use STSEndpoint
// too (the S3 backend's endpoints.sts applies to every STS request).
func TestNew_SDKRolesUseTheSTSEndpoint(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target

	t.Run("AWS_WEB_IDENTITY_TOKEN_FILE", func(t *testing.T) {
		sts := newSTS(t, tg)
		t.Setenv(awsclient.EnvRoleARN, webRole)
		t.Setenv(awsclient.EnvWebIdentityTokenFile, writeToken(t))
		client, err := awsclient.New(t.Context(), awsclient.Options{Region: tg.Region, Endpoint: tg.Endpoint,
			UsePathStyle: true, STSEndpoint: sts.URL})
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, ns.Bucket)
		if calls := sts.Calls("AssumeRoleWithWebIdentity"); len(calls) != 1 || calls[0].Form.Get("RoleArn") != webRole {
			t.Fatalf("STS calls %+v, want one AssumeRoleWithWebIdentity of %s", sts.Calls(""), webRole)
		}
	})
	t.Run("profile role_arn", func(t *testing.T) {
		sts := newSTS(t, tg)
		creds := "[base]\naws_access_key_id = base-key\naws_secret_access_key = base-secret\n"
		conf := fmt.Sprintf("[profile locks]\nregion = %s\nrole_arn = %s\nsource_profile = base\n", tg.Region, chainRole)
		if err := os.WriteFile(os.Getenv("AWS_SHARED_CREDENTIALS_FILE"), []byte(creds), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		client, err := awsclient.New(t.Context(), awsclient.Options{Profile: "locks", Endpoint: tg.Endpoint,
			UsePathStyle: true, STSEndpoint: sts.URL})
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, ns.Bucket)
		calls := sts.Calls("AssumeRole")
		if len(calls) != 1 || calls[0].Form.Get("RoleArn") != chainRole || calls[0].AccessKey != "base-key" {
			t.Fatalf("STS calls %+v, want one AssumeRole of %s signed by the source profile", sts.Calls(""), chainRole)
		}
	})
}

// An SSO profile gets its credentials from the IAM Identity Center portal at
// SSOEndpoint. The portal here is a fake (there is no offline one) that
// checks the cached access token and hands out the local server's
// credentials.
func TestNew_SSOEndpoint(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	const startURL, accessToken = "https://example.awsapps.com/start", "sso-access-token"
	var asked atomic.Int32
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.URL.Path != "/federation/credentials" || r.Header.Get("X-Amz-Sso_bearer_token") != accessToken ||
			r.URL.Query().Get("account_id") != "123456789012" || r.URL.Query().Get("role_name") != "Locks" {
			http.Error(w, `{"message":"unexpected request"}`, http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"roleCredentials": map[string]any{
			"accessKeyId": tg.AccessKey, "secretAccessKey": tg.SecretKey,
			"expiration": time.Now().Add(time.Hour).UnixMilli(),
		}})
	}))
	defer portal.Close()

	conf := fmt.Sprintf("[profile sso]\nregion = %s\nsso_start_url = %s\nsso_region = eu-west-1\n"+
		"sso_account_id = 123456789012\nsso_role_name = Locks\n", tg.Region, startURL)
	if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cache, err := ssocreds.StandardCachedTokenFilepath(startURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(cache), 0o700); err != nil {
		t.Fatal(err)
	}
	token := fmt.Sprintf(`{"accessToken":%q,"expiresAt":%q}`, accessToken, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if err := os.WriteFile(cache, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	client, err := awsclient.New(t.Context(), awsclient.Options{Profile: "sso", SSOEndpoint: portal.URL,
		Endpoint: tg.Endpoint, UsePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client, ns.Bucket)
	if asked.Load() == 0 {
		t.Fatal("the SSO portal was never asked")
	}
}

// Each invalid role setting is refused when the configuration is loaded,
// before any request, with a message that names the rule.
func TestNew_InvalidRoles(t *testing.T) {
	isolate(t)
	token := writeToken(t)
	web := func(w awsclient.WebIdentity) awsclient.Options {
		return awsclient.Options{Region: "us-east-1", AssumeRoleWithWebIdentity: &w}
	}
	role := func(ar awsclient.AssumeRole) awsclient.Options {
		if ar.RoleARN == "" {
			ar.RoleARN = chainRole
		}
		return awsclient.Options{Region: "us-east-1", AssumeRole: &ar}
	}
	tooMany := make([]string, awsclient.MaxPolicyARNs+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("arn:aws:iam::aws:policy/P%d", i)
	}
	for _, tc := range []struct {
		name string
		opts awsclient.Options
		want string
	}{
		{"web identity without a role", web(awsclient.WebIdentity{WebIdentityToken: "t"}), "role ARN is required: set it, or AWS_ROLE_ARN"},
		{"web identity without a token", web(awsclient.WebIdentity{RoleARN: webRole}), "token or a token file is required"},
		{"web identity with token and file", web(awsclient.WebIdentity{RoleARN: webRole, WebIdentityToken: "t",
			WebIdentityTokenFile: token}), "exclude each other"},
		{"web identity token file missing", web(awsclient.WebIdentity{RoleARN: webRole,
			WebIdentityTokenFile: "/nonexistent/token"}), `web identity token file "/nonexistent/token" cannot be read: no such file`},
		{"web identity role not an ARN", web(awsclient.WebIdentity{RoleARN: "ci-locks", WebIdentityToken: "t"}),
			`role ARN "ci-locks" is not of the form arn:`},
		{"web identity duration too short", web(awsclient.WebIdentity{RoleARN: webRole, WebIdentityToken: "t",
			Duration: 5 * time.Minute}), "duration 5m0s is outside [15m, 12h]"},
		{"role duration too long", role(awsclient.AssumeRole{Duration: 13 * time.Hour}), "duration 13h0m0s is outside"},
		{"policy not JSON", role(awsclient.AssumeRole{Policy: "allow everything"}), "not a JSON object"},
		{"policy ARN malformed", role(awsclient.AssumeRole{PolicyARNs: []string{"ReadOnlyAccess"}}), `policy ARN "ReadOnlyAccess"`},
		{"too many policy ARNs", role(awsclient.AssumeRole{PolicyARNs: tooMany}), "11 policy ARNs are more than the 10"},
		{"session name with a space", role(awsclient.AssumeRole{SessionName: "my session"}), `session name "my session"`},
		{"source identity too short", role(awsclient.AssumeRole{SourceIdentity: "a"}), `source identity "a"`},
		{"transitive key without its tag", role(awsclient.AssumeRole{Tags: map[string]string{"team": "x"},
			TransitiveTagKeys: []string{"project"}}), `transitive tag key "project" is not one of the session tags`},
		{"external id too long", role(awsclient.AssumeRole{ExternalID: strings.Repeat("x", 1225)}), "external id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := awsclient.New(t.Context(), tc.opts)
			if !errors.Is(err, awsclient.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidOptions saying %q", err, tc.want)
			}
		})
	}
}
