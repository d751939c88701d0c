//go:build unix

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The connection settings of Terraform's S3 backend, as flags and the AWS
// variables, against versitygw (over HTTPS with a self-signed certificate,
// behind a proxy), and with s3test's local STS where an STS is needed (none
// runs offline).

// releasedOn checks with an SDK client of the store that name was taken
// once and released.
func releasedOn(t *testing.T, c *s3lock.Client, name string) {
	t.Helper()
	st, err := c.Current(t.Context(), name)
	if err != nil {
		t.Fatalf("Current(%s): %v", name, err)
	}
	if st.Epoch != 1 || !st.Released {
		t.Fatalf("after run the lock is %+v, want epoch 1 released", st)
	}
}

// A store with a self-signed certificate: without its CA s3lock exits 1 with
// a certificate error that names the remedy; with --custom-ca-bundle or
// AWS_CA_BUNDLE it takes and releases the lock.
func TestRun_CustomCABundle(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := s3test.NewTLSStore(t)
	sdk, err := s3lock.New(st.Client, st.Bucket, s3lock.WithHolder("test-sdk"))
	if err != nil {
		t.Fatal(err)
	}
	at := []string{"--endpoint", st.Endpoint, "--bucket", st.Bucket}
	run := func(env []string, name string, flags ...string) result {
		args := append(append([]string{"run", "--quiet"}, at...), flags...)
		return c.runWith(env, "", append(args, name, "--", "true")...)
	}

	r := run(c.env, "tls/untrusted")
	if r.code != exitError || !strings.Contains(r.stderr, "certificate signed by unknown authority") ||
		!strings.Contains(r.stderr, "custom CA bundle") || !strings.Contains(r.stderr, "AWS_CA_BUNDLE") {
		t.Fatalf("without the CA: %s; want exit %d with a certificate error naming the remedy", r, exitError)
	}
	if r := run(c.env, "tls/flag", "--custom-ca-bundle", st.CAFile); r.code != exitOK {
		t.Fatalf("--custom-ca-bundle: %s", r)
	}
	releasedOn(t, sdk, "tls/flag")
	if r := run(append(c.without("AWS_CA_BUNDLE"), "AWS_CA_BUNDLE="+st.CAFile), "tls/env"); r.code != exitOK {
		t.Fatalf("AWS_CA_BUNDLE: %s", r)
	}
	releasedOn(t, sdk, "tls/env")
	if r := run(append(c.without(envInsecure), envInsecure+"=true"), "tls/insecure"); r.code != exitOK {
		t.Fatalf("%s=true: %s", envInsecure, r)
	}
	releasedOn(t, sdk, "tls/insecure")
	// The flag wins over the variable of the setting it excludes (a
	// regression test: the two were refused as excluding each other).
	if r := run(append(c.without(envInsecure), envInsecure+"=true"), "tls/flag-over-env", "--custom-ca-bundle", st.CAFile); r.code != exitOK {
		t.Fatalf("--custom-ca-bundle with %s=true: %s", envInsecure, r)
	}
	releasedOn(t, sdk, "tls/flag-over-env")
}

// --http-proxy (or HTTP_PROXY once a proxy flag is given) carries every
// request, counted at the proxy; --no-proxy naming the endpoint carries none.
func TestRun_Proxy(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if !c.ns.Target.Local {
		t.Skip("needs the local server")
	}
	host := strings.TrimPrefix(c.ns.Target.Endpoint, "http://")
	onlyTo := func(t *testing.T, p *s3test.ForwardProxy) {
		t.Helper()
		if p.Count() == 0 {
			t.Fatal("no request went through the proxy")
		}
		for _, r := range p.Requests() {
			if r.Host != host || r.Refused {
				t.Errorf("the proxy carried %s %s, want only requests for %s", r.Method, r.Host, host)
			}
		}
	}

	t.Run("--http-proxy", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		name := c.name("proxy/flag")
		c.mustRun("run", "--quiet", "--http-proxy", proxy.URL, name, "--", "true")
		onlyTo(t, proxy)
		if st := c.current(name); !st.Released {
			t.Fatalf("after run the lock is %+v", st)
		}
	})
	t.Run("HTTP_PROXY with --no-proxy of another host", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		env := append(c.without("HTTP_PROXY", "http_proxy"), "HTTP_PROXY="+proxy.URL)
		if r := c.runWith(env, "", "run", "--quiet", "--no-proxy", "example.com", c.name("proxy/env"), "--", "true"); r.code != exitOK {
			t.Fatal(r)
		}
		onlyTo(t, proxy)
	})
	t.Run("HTTP_PROXY alone", func(t *testing.T) {
		// The environment alone keeps Go's rule: loopback is never proxied.
		proxy := s3test.NewForwardProxy(t)
		env := append(c.without("HTTP_PROXY", "http_proxy"), "HTTP_PROXY="+proxy.URL)
		if r := c.runWith(env, "", "run", "--quiet", c.name("proxy/env-alone"), "--", "true"); r.code != exitOK {
			t.Fatal(r)
		}
		if n := proxy.Count(); n != 0 {
			t.Fatalf("%d requests went through the proxy, want none", n)
		}
	})
	// As in the S3 backend, --http-proxy alone carries https:// requests too
	// (a regression test: they once went direct), and --https-proxy ""
	// sends them directly whatever HTTPS_PROXY says.
	t.Run("--http-proxy carries https", func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		proxy := s3test.NewForwardProxy(t)
		r := c.run("run", "--quiet", "--endpoint", st.Endpoint, "--bucket", st.Bucket, "--custom-ca-bundle", st.CAFile,
			"--http-proxy", proxy.URL, "proxy/http-for-https", "--", "true")
		if r.code != exitOK {
			t.Fatal(r)
		}
		want := strings.TrimPrefix(st.Endpoint, "https://")
		if proxy.Count() == 0 {
			t.Fatal("no request went through the proxy")
		}
		for _, req := range proxy.Requests() {
			if req.Method != http.MethodConnect || req.Host != want {
				t.Errorf("the proxy carried %s %s, want only CONNECT tunnels to %s", req.Method, req.Host, want)
			}
		}
	})
	t.Run(`--https-proxy ""`, func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		httpProxy, envProxy := s3test.NewForwardProxy(t), s3test.NewForwardProxy(t)
		env := append(c.without("HTTPS_PROXY", "https_proxy"), "HTTPS_PROXY="+envProxy.URL)
		r := c.runWith(env, "", "run", "--quiet", "--endpoint", st.Endpoint, "--bucket", st.Bucket, "--custom-ca-bundle", st.CAFile,
			"--http-proxy", httpProxy.URL, "--https-proxy", "", "proxy/https-direct", "--", "true")
		if r.code != exitOK {
			t.Fatal(r)
		}
		if n := httpProxy.Count() + envProxy.Count(); n != 0 {
			t.Fatalf("%d requests went through a proxy (%v, %v), want none", n, httpProxy.Hosts(), envProxy.Hosts())
		}
	})
	t.Run("--no-proxy names the endpoint", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		c.mustRun("run", "--quiet", "--http-proxy", proxy.URL, "--no-proxy", host, c.name("proxy/bypassed"), "--", "true")
		if n := proxy.Count(); n != 0 {
			t.Fatalf("%d requests went through the proxy (%v), want none", n, proxy.Requests())
		}
	})
}

// Web identity without static keys: the flags, or AWS_ROLE_ARN with
// AWS_WEB_IDENTITY_TOKEN_FILE, make s3lock call STS
// AssumeRoleWithWebIdentity (s3test's local STS, which checks the role and
// the token) and take the lock with the credentials it returns.
func TestRun_WebIdentity(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	tg := c.ns.Target
	if !tg.Local {
		t.Skip("needs the local server's static credentials")
	}
	const role, token = "arn:aws:iam::123456789012:role/ci-locks", "eyJhbGciOiJSUzI1NiJ9.ci.sig"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	keyless := c.without("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL_STS")
	newSTS := func(t *testing.T) *s3test.STS {
		t.Helper()
		return s3test.NewSTS(t, s3test.STSConfig{Roles: []string{role}, WebIdentityToken: token,
			AccessKey: tg.AccessKey, SecretKey: tg.SecretKey})
	}
	assumed := func(t *testing.T, sts *s3test.STS, session string) {
		t.Helper()
		calls := sts.Calls("AssumeRoleWithWebIdentity")
		if len(calls) == 0 {
			t.Fatalf("STS got no AssumeRoleWithWebIdentity: %+v", sts.Calls(""))
		}
		for _, call := range calls {
			f := call.Form
			if call.Status != http.StatusOK || f.Get("RoleArn") != role || f.Get("WebIdentityToken") != token ||
				f.Get("RoleSessionName") != session {
				t.Errorf("STS got %v (answered %d)", f, call.Status)
			}
		}
	}

	t.Run("flags", func(t *testing.T) {
		sts := newSTS(t)
		name := c.name("oidc/flags")
		r := c.runWith(keyless, "", "run", "--quiet", "--sts-endpoint", sts.URL, "--web-identity-role-arn", role,
			"--web-identity-token-file", tokenFile, "--web-identity-session-name", "job-9", "--web-identity-duration", "1h",
			name, "--", "true")
		if r.code != exitOK {
			t.Fatal(r)
		}
		assumed(t, sts, "job-9")
		if got := sts.Calls("AssumeRoleWithWebIdentity")[0].Form.Get("DurationSeconds"); got != "3600" {
			t.Errorf("DurationSeconds %q, want 3600", got)
		}
		if st := c.current(name); !st.Released {
			t.Fatalf("after run the lock is %+v", st)
		}
	})
	t.Run("AWS variables", func(t *testing.T) {
		sts := newSTS(t)
		env := append(keyless, "AWS_ROLE_ARN="+role, "AWS_WEB_IDENTITY_TOKEN_FILE="+tokenFile,
			"AWS_ROLE_SESSION_NAME=from-env", "AWS_ENDPOINT_URL_STS="+sts.URL)
		if r := c.runWith(env, "", "run", "--quiet", c.name("oidc/env"), "--", "true"); r.code != exitOK {
			t.Fatal(r)
		}
		assumed(t, sts, "from-env")
	})
	t.Run("AWS variables with --sts-endpoint", func(t *testing.T) {
		sts := newSTS(t)
		env := append(keyless, "AWS_ROLE_ARN="+role, "AWS_WEB_IDENTITY_TOKEN_FILE="+tokenFile, "AWS_ROLE_SESSION_NAME=env-flag")
		if r := c.runWith(env, "", "run", "--quiet", "--sts-endpoint", sts.URL, c.name("oidc/env-flag"), "--", "true"); r.code != exitOK {
			t.Fatal(r)
		}
		assumed(t, sts, "env-flag")
	})
	t.Run(envWebIdentityToken, func(t *testing.T) {
		sts := newSTS(t)
		env := append(keyless, envWebIdentityToken+"="+token)
		if r := c.runWith(env, "", "run", "--quiet", "--sts-endpoint", sts.URL, "--web-identity-role-arn", role,
			c.name("oidc/token"), "--", "true"); r.code != exitOK {
			t.Fatal(r)
		}
		assumed(t, sts, "s3lock")
	})
	// A token file given as a flag wins over the token of the environment
	// (a regression test: the two were refused as excluding each other).
	t.Run("--web-identity-token-file over "+envWebIdentityToken, func(t *testing.T) {
		sts := newSTS(t)
		env := append(keyless, envWebIdentityToken+"=not-the-token")
		if r := c.runWith(env, "", "run", "--quiet", "--sts-endpoint", sts.URL, "--web-identity-role-arn", role,
			"--web-identity-token-file", tokenFile, c.name("oidc/file-over-env"), "--", "true"); r.code != exitOK {
			t.Fatal(r)
		}
		assumed(t, sts, "s3lock")
	})
	t.Run("wrong token", func(t *testing.T) {
		sts := s3test.NewSTS(t, s3test.STSConfig{Roles: []string{role}, WebIdentityToken: "another",
			AccessKey: tg.AccessKey, SecretKey: tg.SecretKey})
		r := c.runWith(keyless, "", "run", "--quiet", "--sts-endpoint", sts.URL, "--web-identity-role-arn", role,
			"--web-identity-token-file", tokenFile, c.name("oidc/refused"), "--", "true")
		if r.code != exitError || !strings.Contains(r.stderr, "InvalidIdentityToken") || strings.Contains(r.stderr, token) {
			t.Fatalf("%s; want exit %d saying InvalidIdentityToken, without the token", r, exitError)
		}
	})
}

// Invalid connection settings are usage errors, named before any request.
func TestBadInput_ConnectionSettings(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("bad-settings")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		says string
	}{
		{"role duration out of range", nil, []string{"--assume-role-arn", "arn:aws:iam::1:role/r", "--assume-role-duration", "5m"},
			`"--assume-role-duration" flag: must be between 15m and 12h`},
		{"role ARN", nil, []string{"--assume-role-arn", "locks"}, `ARN "locks" is not of the form arn:`},
		{"role ARN from the environment", append(c.without(envAssumeRoleARN), envAssumeRoleARN+"=locks"), nil, `ARN "locks"`},
		{"session name without a role", nil, []string{"--assume-role-session-name", "ci"}, "assume role: a role ARN is required: " +
			"--assume-role-session-name asks to assume a role, so set --assume-role-arn or " + envAssumeRoleARN},
		{"session name without a role from the environment", append(c.without(envAssumeRoleSession, envAssumeRoleARN),
			envAssumeRoleSession+"=ci"), nil, envAssumeRoleSession + " asks to assume a role, so set --assume-role-arn or " + envAssumeRoleARN},
		{"external id without a role from the environment", append(c.without(envAssumeRoleExternalID, envAssumeRoleARN),
			envAssumeRoleExternalID+"=ext-1"), nil, envAssumeRoleExternalID + " asks to assume a role, so set --assume-role-arn or " + envAssumeRoleARN},
		{"web identity token and file", nil, []string{"--web-identity-role-arn", "arn:aws:iam::1:role/r",
			"--web-identity-token", "t", "--web-identity-token-file", "/tmp/t"}, "exclude each other"},
		{"web identity token file missing", nil, []string{"--web-identity-role-arn", "arn:aws:iam::1:role/r",
			"--web-identity-token-file", "/nonexistent/token"}, `web identity token file "/nonexistent/token" cannot be read`},
		{"policy not JSON", nil, []string{"--assume-role-arn", "arn:aws:iam::1:role/r", "--assume-role-policy", "all"}, "not a JSON object"},
		{"CA bundle missing", nil, []string{"--custom-ca-bundle", "/nonexistent/ca.pem"}, `custom CA bundle "/nonexistent/ca.pem" cannot be read`},
		{"AWS_CA_BUNDLE missing", append(c.without("AWS_CA_BUNDLE"), "AWS_CA_BUNDLE=/nonexistent/ca.pem"), nil, `AWS_CA_BUNDLE "/nonexistent/ca.pem" cannot be read`},
		{"insecure with a CA bundle", nil, []string{"--insecure", "--custom-ca-bundle", "/nonexistent/ca.pem"}, "pointless"},
		{"insecure not a boolean", append(c.without(envInsecure), envInsecure+"=maybe"), nil, envInsecure},
		{"retry mode", nil, []string{"--retry-mode", "legacy"}, `retry mode "legacy"`},
		{"proxy", nil, []string{"--https-proxy", "ftp://proxy:21"}, `scheme "ftp"`},
		{"no-proxy", nil, []string{"--no-proxy", "10.0.0.0/33"}, "not a CIDR range"},
		{"HTTPS_PROXY of another scheme", append(c.without("HTTPS_PROXY", "https_proxy"), "HTTPS_PROXY=ftp://proxy:21"),
			[]string{"--no-proxy", "example.com"}, `HTTPS_PROXY "ftp://proxy:21" has scheme "ftp"`},
		{"FIPS with a custom endpoint", nil, []string{"--use-fips-endpoint"}, "FIPS endpoints cannot be combined"},
		{"shared config file missing", nil, []string{"--shared-config-files", "/nonexistent/config"}, `shared config file "/nonexistent/config"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = c.env
			}
			args := append(append([]string{"run"}, tc.args...), name, "--", "true")
			r := c.runWith(env, "", args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.says) || r.stdout != "" ||
				strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("%s; want exit %d and one line saying %q", r, exitUsage, tc.says)
			}
		})
	}
}

// --use-fips-endpoint=false (and the other switches set to false) override
// their AWS variables, as the S3 backend's settings set to false do:
// AWS_USE_FIPS_ENDPOINT=true with a custom endpoint fails every request
// (the SDK has no FIPS variant of it), unless the flag turns FIPS off.
func TestRun_FalseSwitchOverridesTheEnvironment(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	env := append(c.without("AWS_USE_FIPS_ENDPOINT"), "AWS_USE_FIPS_ENDPOINT=true")
	if r := c.runWith(env, "", "run", "--quiet", c.name("fips/env"), "--", "true"); r.code == exitOK {
		t.Fatalf("AWS_USE_FIPS_ENDPOINT=true with a custom endpoint: %s; want a failure (else this proves nothing)", r)
	}
	name := c.name("fips/off")
	if r := c.runWith(env, "", "run", "--quiet", "--use-fips-endpoint=false", name, "--", "true"); r.code != exitOK {
		t.Fatalf("--use-fips-endpoint=false with AWS_USE_FIPS_ENDPOINT=true: %s", r)
	}
	if st := c.current(name); !st.Released {
		t.Fatalf("after run the lock is %+v", st)
	}
}
