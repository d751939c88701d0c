package awsclient_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// proxyVariables are the proxy settings of the environment, which Go and
// awsclient read in both cases.
var proxyVariables = map[string]bool{
	"HTTP_PROXY": true, "http_proxy": true, "HTTPS_PROXY": true, "https_proxy": true, "NO_PROXY": true, "no_proxy": true,
}

// isolate clears every AWS and proxy setting the machine running the tests
// may have, so only what a test sets itself is in effect.
func isolate(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || proxyVariables[k] {
			t.Setenv(k, "") // restores the old value after the test
			os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// roundTrip writes, lists and reads back an object through client.
func roundTrip(t *testing.T, client *s3.Client, bucket string) {
	t.Helper()
	ctx := t.Context()
	prefix := "awsclient-" + s3test.RandomHex(4) + "/"
	key := prefix + "object"
	_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("hello")})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	defer out.Body.Close()
	body, _ := io.ReadAll(out.Body)
	if string(body) != "hello" {
		t.Fatalf("read back %q, want %q", body, "hello")
	}
	if keys := s3test.Keys(t, client, bucket, prefix); len(keys) != 1 || keys[0] != key {
		t.Fatalf("listed %v, want [%s]", keys, key)
	}
}

func localOnly(t *testing.T) *s3test.Namespace {
	t.Helper()
	if s3test.External() {
		t.Skip("needs the local server's static credentials")
	}
	return s3test.New(t)
}

func TestNew_StaticCredentials(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	client, err := awsclient.New(t.Context(), awsclient.Options{
		Region: tg.Region, AccessKey: tg.AccessKey, SecretKey: tg.SecretKey,
		Endpoint: tg.Endpoint, UsePathStyle: true, AppID: "awsclient-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := client.Options().Region; got != tg.Region {
		t.Errorf("region %q, want %q", got, tg.Region)
	}
	roundTrip(t, client, ns.Bucket)
}

func TestNew_EnvironmentCredentials(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	t.Setenv("AWS_ACCESS_KEY_ID", tg.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", tg.SecretKey)
	t.Setenv("AWS_REGION", "eu-west-3")
	client, err := awsclient.New(t.Context(), awsclient.Options{Endpoint: tg.Endpoint, UsePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := client.Options().Region; got != "eu-west-3" {
		t.Errorf("region %q, want the one from AWS_REGION", got)
	}
	// The local server checks the region in the signature.
	t.Setenv("AWS_REGION", tg.Region)
	client, err = awsclient.New(t.Context(), awsclient.Options{Endpoint: tg.Endpoint, UsePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client, ns.Bucket)
}

func TestNew_SharedProfile(t *testing.T) {
	ns := localOnly(t)
	isolate(t)
	tg := ns.Target
	creds := fmt.Sprintf("[locktest]\naws_access_key_id = %s\naws_secret_access_key = %s\n", tg.AccessKey, tg.SecretKey)
	// The local server checks the region in the signature, so the profile
	// must name the server's region; the endpoint default is another one.
	conf := fmt.Sprintf("[profile locktest]\nregion = %s\n", tg.Region)
	if err := os.WriteFile(os.Getenv("AWS_SHARED_CREDENTIALS_FILE"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}

	client, err := awsclient.New(t.Context(), awsclient.Options{Profile: "locktest", Endpoint: tg.Endpoint, UsePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := client.Options().Region; got != tg.Region {
		t.Errorf("region %q, want the profile's", got)
	}
	roundTrip(t, client, ns.Bucket)

	// The same profile chosen through AWS_PROFILE.
	t.Setenv("AWS_PROFILE", "locktest")
	client, err = awsclient.New(t.Context(), awsclient.Options{Endpoint: tg.Endpoint, UsePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client, ns.Bucket)

	// A missing profile is a settings error naming the profile and the
	// files looked in (it was "awsclient: loading the AWS configuration:
	// failed to get shared config profile, ...", exit 1 in the CLI).
	_, err = awsclient.New(t.Context(), awsclient.Options{Profile: "no-such-profile", Endpoint: tg.Endpoint})
	if !errors.Is(err, awsclient.ErrInvalidOptions) || !strings.Contains(err.Error(), `the AWS profile "no-such-profile" is in none`) {
		t.Fatalf("a missing profile: %v; want ErrInvalidOptions naming the profile", err)
	}
}

func TestNew_InvalidOptions(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		name string
		opts awsclient.Options
	}{
		{"access key without secret", awsclient.Options{Region: "us-east-1", AccessKey: "a"}},
		{"secret without access key", awsclient.Options{Region: "us-east-1", SecretKey: "s"}},
		{"token alone", awsclient.Options{Region: "us-east-1", Token: "t"}},
		{"endpoint without scheme", awsclient.Options{Endpoint: "127.0.0.1:9000"}},
		{"endpoint with another scheme", awsclient.Options{Endpoint: "ftp://example.com"}},
		{"negative timeout", awsclient.Options{Region: "us-east-1", ConnectTimeout: -time.Second}},
		{"negative attempts", awsclient.Options{Region: "us-east-1", MaxAttempts: -1}},
		{"assume role without ARN", awsclient.Options{Region: "us-east-1", AssumeRole: &awsclient.AssumeRole{}}},
		{"assume role with a malformed ARN", awsclient.Options{Region: "us-east-1", AssumeRole: &awsclient.AssumeRole{RoleARN: "locker"}}},
		// Read as an unreachable store ("retry later") when the SDK refused it per request.
		{"a region that is no host label", awsclient.Options{Region: "bad region", Endpoint: "http://127.0.0.1:1"}},
		{"a region that is no host label, validation skipped", awsclient.Options{Region: "eu_west", SkipRegionValidation: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := awsclient.New(t.Context(), tc.opts)
			if !errors.Is(err, awsclient.ErrInvalidOptions) {
				t.Fatalf("got %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestNew_Region(t *testing.T) {
	isolate(t)
	_, err := awsclient.New(t.Context(), awsclient.Options{})
	if !errors.Is(err, awsclient.ErrNoRegion) {
		t.Fatalf("no region anywhere: got %v, want ErrNoRegion", err)
	}
	client, err := awsclient.New(t.Context(), awsclient.Options{Endpoint: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := client.Options().Region; got != awsclient.DefaultEndpointRegion {
		t.Fatalf("custom endpoint without a region: got %q, want %q", got, awsclient.DefaultEndpointRegion)
	}
}

// An endpoint that refuses connections fails after exactly MaxAttempts
// attempts, each a connection error: no endless retrying.
func TestNew_UnreachableEndpointGivesUp(t *testing.T) {
	isolate(t)
	for _, attempts := range []int{1, 3} {
		t.Run(fmt.Sprint(attempts), func(t *testing.T) {
			client, err := awsclient.New(t.Context(), awsclient.Options{
				Endpoint: "http://127.0.0.1:1", UsePathStyle: true, AccessKey: "a", SecretKey: "s",
				MaxAttempts: attempts, MaxBackoff: 10 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("bucket")})
			var netErr net.Error
			if !errors.As(err, &netErr) {
				t.Fatalf("got %v, want a network error", err)
			}
			var maxErr *retry.MaxAttemptsError
			if !errors.As(err, &maxErr) || maxErr.Attempt != attempts {
				t.Fatalf("got %v, want it to give up after %d attempts", err, attempts)
			}
		})
	}
}

// A server that accepts the connection and never answers trips the
// response timeout instead of hanging.
func TestNew_ResponseTimeout(t *testing.T) {
	isolate(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				<-done // hold the connection open without answering
				c.Close()
			}()
		}
	}()
	defer func() {
		l.Close()
		<-accepting
		close(done)
		conns.Wait()
	}()

	client, err := awsclient.New(t.Context(), awsclient.Options{
		Endpoint: "http://" + l.Addr().String(), UsePathStyle: true, AccessKey: "a", SecretKey: "s",
		MaxAttempts: 1, ResponseTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String("bucket")})
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("got %v, want a timeout", err)
	}
}
