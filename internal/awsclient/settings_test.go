package awsclient_test

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// storeOptions are the options of a client of tg with its static
// credentials.
func storeOptions(tg s3test.Target) awsclient.Options {
	return awsclient.Options{Region: tg.Region, AccessKey: tg.AccessKey, SecretKey: tg.SecretKey,
		Endpoint: tg.Endpoint, UsePathStyle: true}
}

// A store with a self-signed certificate is refused with a certificate
// error that says what to do, and reached with its CA in CustomCABundle or
// AWS_CA_BUNDLE, or with Insecure.
func TestNew_CustomCABundle(t *testing.T) {
	isolate(t)
	st := s3test.NewTLSStore(t)
	opts := storeOptions(st.Target)
	opts.MaxAttempts = 1

	t.Run("untrusted", func(t *testing.T) {
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(st.Bucket)})
		var certErr *awsclient.CertificateError
		if !errors.As(err, &certErr) || !strings.Contains(err.Error(), "certificate signed by unknown authority") ||
			!strings.Contains(err.Error(), "custom CA bundle") {
			t.Fatalf("got %v, want a certificate error that names the CA bundle", err)
		}
	})
	t.Run("custom CA bundle", func(t *testing.T) {
		o := opts
		o.CustomCABundle = st.CAFile
		client, err := awsclient.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, st.Bucket)
	})
	t.Run("AWS_CA_BUNDLE", func(t *testing.T) {
		t.Setenv("AWS_CA_BUNDLE", st.CAFile)
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, st.Bucket)
	})
	t.Run("custom CA bundle over AWS_CA_BUNDLE", func(t *testing.T) {
		t.Setenv("AWS_CA_BUNDLE", "/nonexistent/ca.pem")
		o := opts
		o.CustomCABundle = st.CAFile
		client, err := awsclient.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, st.Bucket)
	})
	t.Run("insecure", func(t *testing.T) {
		o := opts
		o.Insecure = true
		client, err := awsclient.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, st.Bucket)
	})
	t.Run("bundle of another CA", func(t *testing.T) {
		other := s3test.NewTLSStore(t)
		o := opts
		o.CustomCABundle = other.CAFile
		client, err := awsclient.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(st.Bucket)})
		var certErr *awsclient.CertificateError
		if !errors.As(err, &certErr) {
			t.Fatalf("got %v, want a certificate error", err)
		}
	})
}

// Requests go through the proxy of their scheme, http:// ones as proxy
// requests and https:// ones through a CONNECT tunnel, unless NoProxy names
// the endpoint.
func TestNew_Proxy(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	host := strings.TrimPrefix(tg.Endpoint, "http://")

	through := func(t *testing.T, proxy *s3test.ForwardProxy, opts awsclient.Options, bucket, want string) {
		t.Helper()
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, bucket)
		reqs := proxy.Requests()
		if len(reqs) == 0 {
			t.Fatal("no request went through the proxy")
		}
		for _, r := range reqs {
			if r.Host != want || r.Refused {
				t.Errorf("the proxy carried %s %s (refused %v), want only requests for %s", r.Method, r.Host, r.Refused, want)
			}
		}
	}
	direct := func(t *testing.T, opts awsclient.Options, bucket string, proxies ...*s3test.ForwardProxy) {
		t.Helper()
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, bucket)
		for _, proxy := range proxies {
			if n := proxy.Count(); n != 0 {
				t.Fatalf("%d requests went through the proxy (%v), want none", n, proxy.Hosts())
			}
		}
	}
	tunnels := func(t *testing.T, proxy *s3test.ForwardProxy) {
		t.Helper()
		for _, r := range proxy.Requests() {
			if r.Method != http.MethodConnect {
				t.Errorf("the proxy got %s, want CONNECT tunnels for https", r.Method)
			}
		}
	}

	t.Run("http_proxy", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		opts := storeOptions(tg)
		opts.HTTPProxy = aws.String(proxy.URL)
		through(t, proxy, opts, ns.Bucket, host)
		for _, r := range proxy.Requests() {
			if r.Method == http.MethodConnect || r.Header.Get("Authorization") == "" {
				t.Errorf("the proxy got %s with headers %v, want signed proxy requests", r.Method, r.Header)
			}
		}
	})
	t.Run("https_proxy", func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		proxy := s3test.NewForwardProxy(t)
		opts := storeOptions(st.Target)
		opts.CustomCABundle, opts.HTTPSProxy = st.CAFile, aws.String(proxy.URL)
		through(t, proxy, opts, st.Bucket, strings.TrimPrefix(st.Endpoint, "https://"))
		tunnels(t, proxy)
	})
	t.Run("https_proxy does not carry http", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		opts := storeOptions(tg)
		opts.HTTPSProxy = aws.String(proxy.URL)
		direct(t, opts, ns.Bucket, proxy)
	})
	// The S3 backend's legacy proxy mode: http_proxy alone is the proxy of
	// https:// requests too (a regression test: it once left them direct).
	t.Run("http_proxy alone carries https", func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		proxy := s3test.NewForwardProxy(t)
		opts := storeOptions(st.Target)
		opts.CustomCABundle, opts.HTTPProxy = st.CAFile, aws.String(proxy.URL)
		through(t, proxy, opts, st.Bucket, strings.TrimPrefix(st.Endpoint, "https://"))
		tunnels(t, proxy)
	})
	t.Run("HTTPS_PROXY over http_proxy for https", func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		httpProxy, httpsProxy := s3test.NewForwardProxy(t), s3test.NewForwardProxy(t)
		t.Setenv("HTTPS_PROXY", httpsProxy.URL)
		opts := storeOptions(st.Target)
		opts.CustomCABundle, opts.HTTPProxy = st.CAFile, aws.String(httpProxy.URL)
		through(t, httpsProxy, opts, st.Bucket, strings.TrimPrefix(st.Endpoint, "https://"))
		if n := httpProxy.Count(); n != 0 {
			t.Errorf("%d requests went through http_proxy (%v), want them all through HTTPS_PROXY", n, httpProxy.Hosts())
		}
	})
	t.Run(`https_proxy "" is none, whatever HTTPS_PROXY says`, func(t *testing.T) {
		st := s3test.NewTLSStore(t)
		httpProxy, envProxy := s3test.NewForwardProxy(t), s3test.NewForwardProxy(t)
		t.Setenv("HTTPS_PROXY", envProxy.URL)
		opts := storeOptions(st.Target)
		opts.CustomCABundle, opts.HTTPProxy, opts.HTTPSProxy = st.CAFile, aws.String(httpProxy.URL), aws.String("")
		direct(t, opts, st.Bucket, httpProxy, envProxy)
	})
	t.Run(`http_proxy "" is none, whatever HTTP_PROXY says`, func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		t.Setenv("HTTP_PROXY", proxy.URL)
		opts := storeOptions(tg)
		opts.HTTPProxy = aws.String("")
		direct(t, opts, ns.Bucket, proxy)
	})
	for _, np := range []string{"127.0.0.1", host, "localhost,127.0.0.0/8", "*"} {
		t.Run("no_proxy="+np, func(t *testing.T) {
			proxy := s3test.NewForwardProxy(t)
			opts := storeOptions(tg)
			opts.HTTPProxy, opts.NoProxy = aws.String(proxy.URL), np
			direct(t, opts, ns.Bucket, proxy)
		})
	}
	t.Run("no_proxy of another port", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		opts := storeOptions(tg)
		opts.HTTPProxy, opts.NoProxy = aws.String(proxy.URL), "127.0.0.1:1"
		through(t, proxy, opts, ns.Bucket, host)
	})
	// NO_PROXY is shared with other tools, whose syntaxes Go skips: its
	// entries that this syntax does not read are skipped too (a
	// regression test: they once failed the whole configuration).
	t.Run("NO_PROXY with entries of other syntaxes", func(t *testing.T) {
		proxy := s3test.NewForwardProxy(t)
		t.Setenv("NO_PROXY", "172.16.*, *.corp.*, [fd00::]/8, 127.0.0.1")
		opts := storeOptions(tg)
		opts.HTTPProxy = aws.String(proxy.URL)
		direct(t, opts, ns.Bucket, proxy)
	})
	t.Run("HTTP_PROXY with an explicit no_proxy", func(t *testing.T) {
		// An explicit setting switches to this package's rules, which
		// apply the environment's proxy to loopback too. (HTTP_PROXY
		// alone, Go's own rules, is TestRun_Proxy's in cmd/s3lock: Go
		// reads the environment once per process.)
		proxy := s3test.NewForwardProxy(t)
		t.Setenv("HTTP_PROXY", proxy.URL)
		opts := storeOptions(tg)
		opts.NoProxy = "example.com"
		through(t, proxy, opts, ns.Bucket, host)
	})
}

// Where the SDK would send a request with AWS's own endpoints, seen at a
// proxy that refuses every host but loopback.
func endpointHosts(t *testing.T, opts awsclient.Options, call func(aws.Config) error) []string {
	t.Helper()
	proxy := s3test.NewForwardProxy(t)
	opts.HTTPSProxy, opts.MaxAttempts = aws.String(proxy.URL), 1
	cfg, err := awsclient.LoadConfig(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(cfg); err == nil {
		t.Fatal("a request to AWS succeeded through a proxy that refuses it")
	}
	return proxy.Hosts()
}

func TestNew_EndpointVariants(t *testing.T) {
	isolate(t)
	head := func(opts awsclient.Options) func(aws.Config) error {
		return func(cfg aws.Config) error {
			_, err := awsclient.S3Client(cfg, opts).HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String("locks")})
			return err
		}
	}
	base := awsclient.Options{Region: "us-east-1", AccessKey: "a", SecretKey: "s"}
	for _, tc := range []struct {
		name       string
		fips, dual bool
		want       string
	}{
		{"default", false, false, "locks.s3.us-east-1.amazonaws.com:443"},
		{"FIPS", true, false, "locks.s3-fips.us-east-1.amazonaws.com:443"},
		{"dual-stack", false, true, "locks.s3.dualstack.us-east-1.amazonaws.com:443"},
		{"FIPS and dual-stack", true, true, "locks.s3-fips.dualstack.us-east-1.amazonaws.com:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := base
			opts.UseFIPSEndpoint, opts.UseDualStackEndpoint = aws.Bool(tc.fips), aws.Bool(tc.dual)
			if hosts := endpointHosts(t, opts, head(opts)); len(hosts) != 1 || hosts[0] != tc.want {
				t.Fatalf("requests went to %v, want %s", hosts, tc.want)
			}
		})
	}
	// Set explicitly, false overrides the environment, as the S3 backend's
	// use_fips_endpoint = false does; unset leaves it to the environment.
	t.Run("false over AWS_USE_FIPS_ENDPOINT and AWS_USE_DUALSTACK_ENDPOINT", func(t *testing.T) {
		t.Setenv("AWS_USE_FIPS_ENDPOINT", "true")
		t.Setenv("AWS_USE_DUALSTACK_ENDPOINT", "true")
		if hosts := endpointHosts(t, base, head(base)); len(hosts) != 1 || hosts[0] != "locks.s3-fips.dualstack.us-east-1.amazonaws.com:443" {
			t.Fatalf("unset, with the variables true: requests went to %v, want the FIPS dual-stack endpoint", hosts)
		}
		opts := base
		opts.UseFIPSEndpoint, opts.UseDualStackEndpoint = aws.Bool(false), aws.Bool(false)
		if hosts := endpointHosts(t, opts, head(opts)); len(hosts) != 1 || hosts[0] != "locks.s3.us-east-1.amazonaws.com:443" {
			t.Fatalf("false, with the variables true: requests went to %v, want locks.s3.us-east-1.amazonaws.com:443", hosts)
		}
	})
	t.Run("sts_region", func(t *testing.T) {
		opts := base
		opts.STSRegion = "eu-west-1"
		hosts := endpointHosts(t, opts, func(cfg aws.Config) error {
			_, err := awsclient.STSClient(cfg, opts).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
			return err
		})
		if len(hosts) != 1 || hosts[0] != "sts.eu-west-1.amazonaws.com:443" {
			t.Fatalf("STS requests went to %v, want sts.eu-west-1.amazonaws.com:443", hosts)
		}
	})
}

// SkipS3Checksum: PUTs carry no flexible checksum header (stores such as
// Hetzner's refuse them); without it the SDK sends one. DeleteObjects, whose
// checksum S3 requires, carries Content-MD5 instead of the SDK's CRC32 (a
// regression test: it once kept x-amz-checksum-crc32), and the store
// deletes the objects. The headers and bodies are seen at a forward proxy,
// which gets http:// requests whole.
func TestNew_SkipS3Checksum(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	flexible := func(h http.Header) []string {
		var found []string
		for k := range h {
			if k = strings.ToLower(k); strings.HasPrefix(k, "x-amz-checksum-") || k == "x-amz-sdk-checksum-algorithm" ||
				k == "x-amz-trailer" {
				found = append(found, k)
			}
		}
		sort.Strings(found)
		return found
	}
	// requests makes a round trip and a DeleteObjects, and returns the PUTs
	// and the DeleteObjects the proxy carried.
	requests := func(t *testing.T, skip bool) (puts, deletes []s3test.ProxiedRequest) {
		t.Helper()
		proxy := s3test.NewForwardProxy(t)
		opts := storeOptions(ns.Target)
		opts.HTTPProxy, opts.SkipS3Checksum = aws.String(proxy.URL), skip
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, client, ns.Bucket)
		prefix := "checksums-" + s3test.RandomHex(4) + "/"
		var ids []types.ObjectIdentifier
		for _, k := range []string{"a", "b"} {
			key := prefix + k
			if _, err := client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key),
				Body: strings.NewReader(k)}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(key)})
		}
		out, err := client.DeleteObjects(t.Context(), &s3.DeleteObjectsInput{Bucket: aws.String(ns.Bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			t.Fatalf("DeleteObjects (skip_s3_checksum %v): %v", skip, err)
		}
		if len(out.Errors) != 0 {
			t.Fatalf("DeleteObjects (skip_s3_checksum %v) refused keys: %+v", skip, out.Errors)
		}
		if left := s3test.Keys(t, client, ns.Bucket, prefix); len(left) != 0 {
			t.Fatalf("DeleteObjects (skip_s3_checksum %v) left %v", skip, left)
		}
		for _, r := range proxy.Requests() {
			switch {
			case r.Method == http.MethodPut:
				puts = append(puts, r)
			case r.Method == http.MethodPost && strings.Contains(r.Query, "delete"):
				deletes = append(deletes, r)
			}
		}
		if len(puts) == 0 || len(deletes) != 1 {
			t.Fatalf("the proxy carried %d PUTs and %d DeleteObjects, want some and one", len(puts), len(deletes))
		}
		return puts, deletes
	}

	puts, deletes := requests(t, false)
	for _, r := range puts {
		if len(flexible(r.Header)) == 0 {
			t.Error("without skip_s3_checksum a PUT carried no checksum header: the test proves nothing")
		}
	}
	if found := flexible(deletes[0].Header); len(found) == 0 {
		t.Error("without skip_s3_checksum DeleteObjects carried no flexible checksum: the test proves nothing")
	}

	puts, deletes = requests(t, true)
	for _, r := range puts {
		if found := flexible(r.Header); len(found) != 0 {
			t.Errorf("with skip_s3_checksum a PUT carried %v", found)
		}
	}
	del := deletes[0]
	if found := flexible(del.Header); len(found) != 0 {
		t.Errorf("with skip_s3_checksum DeleteObjects carried %v", found)
	}
	sum := md5.Sum(del.Body)
	if got, want := del.Header.Get("Content-MD5"), base64.StdEncoding.EncodeToString(sum[:]); got != want {
		t.Errorf("with skip_s3_checksum DeleteObjects carried Content-MD5 %q, want %q, the MD5 of its body", got, want)
	}
}

func TestNew_RetryMode(t *testing.T) {
	isolate(t)
	mode := func(t *testing.T, opts awsclient.Options) string {
		t.Helper()
		opts.Endpoint, opts.AccessKey, opts.SecretKey = "http://127.0.0.1:1", "a", "s"
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		switch r := client.Options().Retryer.(type) {
		case *retry.AdaptiveMode:
			return awsclient.RetryModeAdaptive
		case *retry.Standard:
			return awsclient.RetryModeStandard
		default:
			return fmt.Sprintf("%T", r)
		}
	}
	if got := mode(t, awsclient.Options{}); got != awsclient.RetryModeStandard {
		t.Errorf("default: %s, want standard", got)
	}
	if got := mode(t, awsclient.Options{RetryMode: awsclient.RetryModeAdaptive}); got != awsclient.RetryModeAdaptive {
		t.Errorf("retry_mode adaptive: %s", got)
	}
	conf := "[default]\nretry_mode = adaptive\n"
	if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, awsclient.Options{}); got != awsclient.RetryModeAdaptive {
		t.Errorf("shared config retry_mode = adaptive: %s", got)
	}
	t.Setenv("AWS_RETRY_MODE", "standard")
	if got := mode(t, awsclient.Options{}); got != awsclient.RetryModeStandard {
		t.Errorf("AWS_RETRY_MODE=standard over the shared config: %s", got)
	}
	if got := mode(t, awsclient.Options{RetryMode: awsclient.RetryModeAdaptive}); got != awsclient.RetryModeAdaptive {
		t.Errorf("retry_mode adaptive over AWS_RETRY_MODE: %s", got)
	}

	// The adaptive retryer keeps the attempt limit.
	client, err := awsclient.New(t.Context(), awsclient.Options{Endpoint: "http://127.0.0.1:1", UsePathStyle: true,
		AccessKey: "a", SecretKey: "s", MaxAttempts: 2, RetryMode: awsclient.RetryModeAdaptive})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String("bucket")})
	var maxErr *retry.MaxAttemptsError
	if !errors.As(err, &maxErr) || maxErr.Attempt != 2 {
		t.Fatalf("got %v, want it to give up after 2 attempts", err)
	}
}

// SkipMetadataAPICheck: with no other credentials the SDK asks the instance
// metadata service (here a local stand-in) unless told not to.
func TestNew_SkipMetadataAPICheck(t *testing.T) {
	isolate(t)
	var asked atomic.Int32
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	defer imds.Close()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	check := func(skip *bool, disabledEnv string, wantAsked bool) {
		t.Helper()
		t.Setenv("AWS_EC2_METADATA_DISABLED", disabledEnv)
		asked.Store(0)
		cfg, err := awsclient.LoadConfig(t.Context(), awsclient.Options{Region: "us-east-1", SkipMetadataAPICheck: skip, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.Credentials.Retrieve(t.Context()); err == nil {
			t.Fatalf("skip %v: credentials found where there are none", aws.ToBool(skip))
		}
		if n := asked.Load(); (n > 0) != wantAsked {
			t.Errorf("skip_metadata_api_check %v, AWS_EC2_METADATA_DISABLED=%q: the metadata service was asked %d times",
				skip != nil && *skip, disabledEnv, n)
		}
	}
	check(nil, "", true)
	check(aws.Bool(false), "", true)
	check(aws.Bool(true), "", false)
	check(nil, "true", false)
	// Set explicitly, false overrides the variable, as the S3 backend's
	// skip_metadata_api_check = false does.
	check(aws.Bool(false), "true", true)
}

// SharedConfigFiles and SharedCredentialsFiles replace the default files; a
// leading ~/ is the home directory.
func TestNew_SharedFiles(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	home := os.Getenv("HOME")
	creds := fmt.Sprintf("[locks]\naws_access_key_id = %s\naws_secret_access_key = %s\n", tg.AccessKey, tg.SecretKey)
	conf := fmt.Sprintf("[profile locks]\nregion = %s\n", tg.Region)
	if err := os.WriteFile(filepath.Join(home, "my-credentials"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "my-config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := awsclient.New(t.Context(), awsclient.Options{Profile: "locks", Endpoint: tg.Endpoint, UsePathStyle: true,
		SharedConfigFiles: []string{"~/my-config"}, SharedCredentialsFiles: []string{filepath.Join(home, "my-credentials")}})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client, ns.Bucket)
}

// Without a custom endpoint the region must look like AWS's; with one, or
// with SkipRegionValidation, any name goes.
func TestNew_RegionValidation(t *testing.T) {
	isolate(t)
	_, err := awsclient.New(t.Context(), awsclient.Options{Region: "garage"})
	if !errors.Is(err, awsclient.ErrInvalidOptions) || !strings.Contains(err.Error(), `region "garage" is not the name of an AWS region`) {
		t.Fatalf("got %v, want the region refused", err)
	}
	for _, opts := range []awsclient.Options{
		{Region: "garage", SkipRegionValidation: true},
		{Region: "garage", Endpoint: "https://garage.example.com"},
		{Region: "us-gov-west-1"},
		{Region: "cn-northwest-1"},
		{Region: "us-isob-east-1"},
		{Region: "eu-isoe-west-1"},
		{Region: "us-isof-south-1"},
		// The European Sovereign Cloud: a prefix of four letters (a
		// regression test: such a region was once refused).
		{Region: "eusc-de-east-1"},
		{Region: "eusc-de-east-1", STSRegion: "eusc-de-east-1"},
	} {
		client, err := awsclient.New(t.Context(), opts)
		if err != nil {
			t.Errorf("%+v: %v", opts, err)
			continue
		}
		if got := client.Options().Region; got != opts.Region {
			t.Errorf("region %q, want %q", got, opts.Region)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL_S3", "https://garage.example.com")
	if _, err := awsclient.New(t.Context(), awsclient.Options{Region: "garage"}); err != nil {
		t.Errorf("a custom endpoint from AWS_ENDPOINT_URL_S3: %v", err)
	}
}

// Each invalid connection setting is refused when the configuration is
// loaded, with a message that names the rule.
func TestNew_InvalidSettings(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts awsclient.Options
		want string
	}{
		{"CA bundle missing", awsclient.Options{CustomCABundle: "/nonexistent/ca.pem"}, `custom CA bundle "/nonexistent/ca.pem" cannot be read: no such file`},
		{"CA bundle not PEM", awsclient.Options{CustomCABundle: notPEM}, "holds no PEM certificate"},
		{"insecure with a CA bundle", awsclient.Options{CustomCABundle: notPEM, Insecure: true}, "pointless"},
		{"shared config file missing", awsclient.Options{SharedConfigFiles: []string{"/nonexistent/config"}}, `shared config file "/nonexistent/config" cannot be read`},
		{"shared credentials file a directory", awsclient.Options{SharedCredentialsFiles: []string{dir}}, "is a directory"},
		{"FIPS with a custom endpoint", awsclient.Options{UseFIPSEndpoint: aws.Bool(true), Endpoint: "https://minio.example.com"}, "FIPS endpoints cannot be combined with the custom S3 endpoint"},
		{"dual-stack with a custom STS endpoint", awsclient.Options{UseDualStackEndpoint: aws.Bool(true), STSEndpoint: "https://sts.example.com"}, "dual-stack endpoints cannot be combined with the custom STS endpoint"},
		{"unknown retry mode", awsclient.Options{RetryMode: "legacy"}, `retry mode "legacy" is neither`},
		{"proxy of another scheme", awsclient.Options{HTTPSProxy: aws.String("ftp://proxy:21")}, `HTTPS proxy "ftp://proxy:21" has scheme "ftp"`},
		{"proxy password not shown", awsclient.Options{HTTPSProxy: aws.String("ftp://user:hunter2@proxy:21")}, "user:xxxxx@proxy"},
		{"password of a proxy that is no URL not shown", awsclient.Options{HTTPProxy: aws.String("http://user:hunter2@proxy:%zz")},
			`HTTP proxy "http://user:xxxxx@proxy:%zz" is not a URL`},
		{"no_proxy with a bad CIDR", awsclient.Options{NoProxy: "10.0.0.0/33"}, `no-proxy entry "10.0.0.0/33" is not a CIDR range`},
		{"SSO endpoint not a URL", awsclient.Options{SSOEndpoint: "portal.example.com"}, "not an http:// or https:// URL"},
		{"STS region of another shape", awsclient.Options{STSRegion: "global"}, `STS region "global"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Region = "us-east-1"
			_, err := awsclient.New(t.Context(), tc.opts)
			if !errors.Is(err, awsclient.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidOptions saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the proxy password: %v", err)
			}
		})
	}
	// A proxy of the environment, in use once a proxy setting is given,
	// is named by its variable.
	t.Run("HTTPS_PROXY of another scheme", func(t *testing.T) {
		t.Setenv("https_proxy", "ftp://user:hunter2@proxy:21")
		_, err := awsclient.New(t.Context(), awsclient.Options{Region: "us-east-1", NoProxy: "example.com"})
		if !errors.Is(err, awsclient.ErrInvalidOptions) || !strings.Contains(err.Error(), `https_proxy "ftp://user:xxxxx@proxy:21" has scheme "ftp"`) {
			t.Fatalf("got %v, want the variable named, without the password", err)
		}
	})
}
