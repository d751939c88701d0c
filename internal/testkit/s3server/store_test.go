package s3server_test

import (
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// envStores names the stores these tests start, comma-separated (default
// versitygw,s3rver): MinIO and SeaweedFS take minutes to build the first
// time, so only make test-stores, which builds them anyway, asks for them.
const envStores = "S3LOCK_TEST_STORES"

func storesUnderTest(t *testing.T) []s3server.Kind {
	t.Helper()
	list := os.Getenv(envStores)
	if list == "" {
		list = "versitygw,s3rver"
	}
	var kinds []s3server.Kind
	for name := range strings.SplitSeq(list, ",") {
		k, err := s3server.ParseKind(name)
		if err != nil {
			t.Fatalf("%s: %v", envStores, err)
		}
		kinds = append(kinds, k)
	}
	return kinds
}

// startStore starts kind on dir, skipping the test if the store cannot run
// on this machine (s3test.EnvRequireS3rver).
func startStore(t *testing.T, kind s3server.Kind, dir string) s3server.Store {
	t.Helper()
	return s3test.StartStore(t, kind, dir)
}

// TestStore_ServesS3OnLoopbackAndKeepsItsDataAcrossRestarts: every store
// listens on 127.0.0.1 with its own credentials, answers signed requests,
// rejects unknown credentials (s3rver checks only the access key), stops (its port closes), and started again on its
// directory has the bucket and object of before.
func TestStore_ServesS3OnLoopbackAndKeepsItsDataAcrossRestarts(t *testing.T) {
	for _, kind := range storesUnderTest(t) {
		t.Run(string(kind), func(t *testing.T) {
			dir := t.TempDir()
			st := startStore(t, kind, dir)
			if st.Kind() != kind || st.Version() == "" || st.DataDir() != dir {
				t.Fatalf("store %s %q in %s; want %s with a version in %s", st.Kind(), st.Version(), st.DataDir(), kind, dir)
			}
			u, err := url.Parse(st.URL())
			if err != nil || u.Hostname() != "127.0.0.1" {
				t.Fatalf("URL %q: want http://127.0.0.1:PORT (%v)", st.URL(), err)
			}
			c := s3server.NewClient(st, nil)
			bucket, key := "s3server-test", "kept/object"
			if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("kept")}); err != nil {
				t.Fatal(err)
			}

			wrong := s3.New(s3.Options{
				Region: s3server.Region, BaseEndpoint: aws.String(st.URL()), UsePathStyle: true, Retryer: aws.NopRetryer{},
				Credentials: credentials.NewStaticCredentialsProvider("wrong-key", "wrong-secret", ""),
			})
			if _, err := wrong.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}); err == nil {
				t.Error("a request signed with unknown credentials was accepted")
			}

			st.Stop()
			if conn, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
				_ = conn.Close()
				t.Errorf("%s still accepts connections after Stop", u.Host)
			}
			again := startStore(t, kind, dir)
			out, err := s3server.NewClient(again, nil).GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("after a restart on %s: %v", dir, err)
			}
			defer out.Body.Close()
			if body, _ := io.ReadAll(out.Body); string(body) != "kept" {
				t.Fatalf("after a restart the object holds %q", body)
			}
		})
	}
}

// TestStore_S3rverIgnoresConditionalWrites: s3rver is in the matrix as a
// store that accepts If-None-Match and If-Match and ignores them. If a new
// version enforced them, the refusal tests would prove nothing: this fails
// first.
func TestStore_S3rverIgnoresConditionalWrites(t *testing.T) {
	if !slices.Contains(storesUnderTest(t), s3server.S3rver) {
		t.Skipf("s3rver is not in %s", envStores)
	}
	st := startStore(t, s3server.S3rver, t.TempDir())
	c := s3server.NewClient(st, nil)
	bucket, key := "s3rver-test", "object"
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	put := func(body string, cond func(*s3.PutObjectInput)) error {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
		cond(in)
		_, err := c.PutObject(t.Context(), in)
		return err
	}
	if err := put("first", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); err != nil {
		t.Fatal(err)
	}
	if err := put("second", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); err != nil {
		t.Fatalf("s3rver refused a second create with If-None-Match: * (%v): it enforces the header now, pick another ignoring store", err)
	}
	if err := put("third", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"00000000000000000000000000000000"`) }); err != nil {
		t.Fatalf("s3rver refused a write with If-Match on a wrong ETag (%v): it enforces the header now, pick another ignoring store", err)
	}
}

// TestParseKind: the store names parse case-insensitively; an unknown one
// is an error that lists the known ones.
func TestParseKind(t *testing.T) {
	for _, k := range s3server.Kinds() {
		if got, err := s3server.ParseKind(" " + strings.ToUpper(string(k)) + " "); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	_, err := s3server.ParseKind("ceph")
	if err == nil || !strings.Contains(err.Error(), "versitygw, minio, seaweedfs, s3rver") {
		t.Errorf("ParseKind(ceph) = %v; want an error listing the stores", err)
	}
	if _, err := s3server.StartStore(t.Context(), "ceph", s3server.StoreOptions{}); err == nil {
		t.Error("StartStore(ceph) started something")
	}
}

// TestStore_ServesHTTPSWithACertificate: versitygw and MinIO given a
// certificate speak HTTPS with it (a client that trusts it lists the
// bucket; one that does not fails to verify the store); the other stores
// refuse a certificate with a clear error instead of serving plain HTTP.
func TestStore_ServesHTTPSWithACertificate(t *testing.T) {
	for _, kind := range storesUnderTest(t) {
		t.Run(string(kind), func(t *testing.T) {
			if kind != s3server.Versitygw && kind != s3server.MinIO {
				_, err := s3server.StartStore(t.Context(), kind, s3server.StoreOptions{
					Dir: t.TempDir(), CertFile: "cert.pem", KeyFile: "key.pem", NoInstall: true})
				if err == nil || !strings.Contains(err.Error(), "TLS") {
					t.Fatalf("StartStore(%s) with a certificate = %v; want a refusal naming TLS", kind, err)
				}
				return
			}
			st := s3test.NewTLSStoreOf(t, kind)
			if !strings.HasPrefix(st.Endpoint, "https://127.0.0.1:") {
				t.Fatalf("endpoint %q; want https://127.0.0.1:PORT", st.Endpoint)
			}
			if _, err := st.Client.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(st.Bucket)}); err != nil {
				t.Fatalf("a client that trusts the certificate: %v", err)
			}
			untrusting := st.Target
			untrusting.CAFile = ""
			_, err := s3test.NewClient(t, untrusting).HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(st.Bucket)})
			if err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("a client that does not trust the certificate: %v; want a certificate error", err)
			}
		})
	}
}
