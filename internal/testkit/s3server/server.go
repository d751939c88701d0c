// Package s3server runs a real S3-compatible server as a separate process on
// loopback, for the tests and the local demo: versitygw with its posix
// backend (Start, the default store), and for the store matrix MinIO,
// SeaweedFS and s3rver, all behind the Store interface (StartStore). The
// versitygw binary is built once from the pinned module in tools/versitygw
// and cached by the Go build cache; MinIO and SeaweedFS are built by
// tools/stores/build.sh and s3rver is installed by tools/s3rver/install.sh,
// each once per machine, so later runs start them at once.
package s3server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default credentials of the local server. They are not secret: the server
// listens on loopback only and lives as long as the process that started it.
const (
	AccessKeyID     = "s3lock-local"
	SecretAccessKey = "s3lock-local-secret"
	Region          = "us-east-1"
	healthPath      = "/health"
)

// EnvBinary names an environment variable that may point at a prebuilt
// versitygw binary; when unset the binary is built from tools/versitygw.
const EnvBinary = "S3LOCK_VERSITYGW"

// Server is a running versitygw process.
type Server struct {
	// Endpoint is the base URL of the S3 API, e.g. http://127.0.0.1:41234.
	Endpoint string
	// Dir is the directory that holds the buckets.
	Dir string

	*process
}

// Options tune Start.
type Options struct {
	// Dir is where the buckets live; a fresh temporary directory when empty.
	Dir string
	// Port to listen on (loopback only); a free port when zero.
	Port int
	// CertFile and KeyFile, when set, make the server speak HTTPS with this
	// PEM certificate and key (versitygw's --cert and --key), and Endpoint
	// an https:// URL. The certificate must be valid for 127.0.0.1, and its
	// file must also hold the CA it chains to (a self-signed certificate
	// does): Start checks the server's health with it.
	CertFile, KeyFile string
	// Versioning lets buckets be versioned (versitygw's --versioning-dir,
	// a directory beside Dir); a bucket still needs PutBucketVersioning.
	Versioning bool
}

// Start builds (or finds) the versitygw binary and starts it. The returned
// server must be stopped with Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "s3lock-versitygw-"); err != nil {
			return nil, fmt.Errorf("s3server: creating data directory: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("s3server: creating data directory: %w", err)
	}
	// A free port can be taken by someone else between the probe and the
	// server's bind; try a few times.
	var lastErr error
	for range 5 {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		s, err := launch(ctx, bin, dir, port, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if opts.Port != 0 {
			break
		}
	}
	return nil, lastErr
}

func launch(ctx context.Context, bin, dir string, port int, opts Options) (*Server, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	probe, err := healthClient(opts)
	if err != nil {
		return nil, err
	}
	args := []string{"--port", addr, "--health", healthPath, "--quiet"}
	scheme := "http"
	if opts.CertFile != "" {
		args = append(args, "--cert", opts.CertFile, "--key", opts.KeyFile)
		scheme = "https"
	}
	posix := []string{"posix"}
	if opts.Versioning {
		versions := dir + "-versions"
		if err := os.MkdirAll(versions, 0o755); err != nil {
			return nil, fmt.Errorf("s3server: creating the versioning directory: %w", err)
		}
		posix = append(posix, "--versioning-dir", versions)
	}
	cmd := exec.Command(bin, append(append(args, posix...), dir)...)
	cmd.Env = append(os.Environ(),
		"ROOT_ACCESS_KEY_ID="+AccessKeyID,
		"ROOT_SECRET_ACCESS_KEY="+SecretAccessKey,
	)
	p, err := startProcess("versitygw", cmd)
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: scheme + "://" + addr, Dir: dir, process: p}
	defer probe.CloseIdleConnections()
	if err := p.waitReady(ctx, readyLimit, func(ctx context.Context) error { return healthy(ctx, probe, s.Endpoint+healthPath) }); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// healthClient is the HTTP client of the health check: with TLS, one that
// trusts the certificates of CertFile.
func healthClient(opts Options) (*http.Client, error) {
	transport, err := trustingTransport(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: time.Second}
	if transport != nil {
		client.Transport = transport
	}
	return client, nil
}

// trustingTransport returns nil without TLS (certFile and keyFile empty),
// else a transport that trusts the certificates of certFile and keeps no
// idle connections.
func trustingTransport(certFile, keyFile string) (*http.Transport, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("s3server: CertFile and KeyFile go together")
	}
	if certFile == "" {
		return nil, nil
	}
	cfg, err := TrustingTLS(certFile)
	if err != nil {
		return nil, err
	}
	return &http.Transport{DisableKeepAlives: true, TLSClientConfig: cfg}, nil
}

// TrustingTLS returns a TLS client configuration that trusts the PEM
// certificates of certFile (a test store's self-signed one) instead of the
// system's.
func TrustingTLS(certFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("s3server: reading the certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("s3server: %s holds no PEM certificate", certFile)
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// healthy reports whether GET url answers 200 OK.
func healthy(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// Binary returns the path of a versitygw executable: $S3LOCK_VERSITYGW when
// set, otherwise the one `go tool` builds from tools/versitygw (cached by the
// Go build cache, so only the first run on a machine pays for the build).
func Binary(ctx context.Context) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("s3server: %s=%q: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	binaryOnce.Do(func() { binaryPath, binaryErr = buildBinary(ctx) })
	return binaryPath, binaryErr
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
	// buildEnv is the environment the process started with. The build runs
	// in it, so that a test that moved HOME (and with it Go's build cache)
	// before the first server started does not rebuild versitygw into a
	// temporary directory that is gone when the next test starts a server.
	buildEnv = os.Environ()
)

func buildBinary(ctx context.Context) (string, error) {
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	// `go tool -n` builds the tool if needed and prints the cached
	// executable's path instead of running it.
	cmd := exec.CommandContext(ctx, "go", "tool", "-n", "versitygw")
	cmd.Dir = dir
	cmd.Env = buildEnv
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("s3server: building versitygw in %s: %w: %s", dir, err, stderr.String())
	}
	path := strings.TrimSpace(string(out))
	if fields := strings.Fields(path); len(fields) > 0 {
		path = fields[0]
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("s3server: go tool -n versitygw printed %q: %w", path, err)
	}
	return path, nil
}

// ToolsDir returns the directory of the versitygw tools module, found next to
// this source file.
func ToolsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("s3server: cannot locate the source tree")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "tools", "versitygw")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("s3server: tools module not found: %w", err)
	}
	return dir, nil
}
