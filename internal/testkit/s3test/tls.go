package s3test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
)

// TLSStore is a store of its own (versitygw unless NewTLSStoreOf says
// otherwise) that speaks HTTPS with a self-signed certificate, as a private
// S3-compatible store does: clients fail to verify it unless they trust
// CAFile.
type TLSStore struct {
	// Endpoint is the server's https:// URL (on 127.0.0.1).
	Endpoint string
	// CAFile is the PEM file of the self-signed certificate, to give
	// clients as their CA bundle.
	CAFile string
	// Bucket is a bucket created on the server for the test.
	Bucket string
	// Target describes the server with its static credentials (path-style)
	// and CAFile.
	Target Target
	// Client is an S3 client that trusts CAFile, to check what was written.
	Client *s3.Client
}

// NewTLSStore starts a versitygw TLS store for the rest of the test.
func NewTLSStore(tb testing.TB) *TLSStore {
	tb.Helper()
	return NewTLSStoreOf(tb, s3server.Versitygw)
}

// NewTLSStoreOf starts a TLS store of kind (versitygw or MinIO) for the rest
// of the test: a fresh self-signed certificate for 127.0.0.1 and localhost,
// made here with crypto/x509, and a store that serves it.
func NewTLSStoreOf(tb testing.TB, kind s3server.Kind) *TLSStore {
	tb.Helper()
	dir := tb.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := writeSelfSigned(certFile, keyFile); err != nil {
		tb.Fatalf("s3test: making a self-signed certificate: %v", err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Minute)
	defer cancel()
	srv, err := s3server.StartStore(ctx, kind, s3server.StoreOptions{Dir: filepath.Join(dir, "store"), CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		tb.Fatalf("s3test: starting %s with TLS: %v", kind, err)
	}
	tb.Cleanup(srv.Stop)

	creds := srv.Credentials()
	tg := Target{Endpoint: srv.URL(), Region: s3server.Region, AccessKey: creds.AccessKeyID,
		SecretKey: creds.SecretAccessKey, PathStyle: true, Local: true, Store: kind, CAFile: certFile}
	client, err := BuildClient(tb.Context(), tg)
	if err != nil {
		tb.Fatal(err)
	}
	st := &TLSStore{Endpoint: srv.URL(), CAFile: certFile, Bucket: "s3lock-tls-" + RandomHex(4), Client: client, Target: tg}
	if _, err := client.CreateBucket(tb.Context(), &s3.CreateBucketInput{Bucket: aws.String(st.Bucket)}); err != nil {
		tb.Fatalf("s3test: creating bucket %s on the TLS store: %v", st.Bucket, err)
	}
	return st
}

// Namespace returns the store's bucket as a namespace of its own.
func (st *TLSStore) Namespace() *Namespace {
	return &Namespace{Client: st.Client, Bucket: st.Bucket, Target: st.Target}
}

// writeSelfSigned writes a self-signed ECDSA certificate for 127.0.0.1, ::1
// and localhost, valid for a day, and its key, as PEM files.
func writeSelfSigned(certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "s3lock test store"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}
