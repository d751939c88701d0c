package s3server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
)

// Kind names an S3-compatible store that StartStore can run.
type Kind string

// The stores StartStore runs. Each is built or installed once per machine
// from a pinned version and cached (see tools/stores and tools/s3rver).
const (
	// Versitygw is versitygw with its posix backend, the store of the
	// default test run (tools/versitygw).
	Versitygw Kind = "versitygw"
	// MinIO is a single-drive MinIO server (tools/stores/versions.txt).
	MinIO Kind = "minio"
	// SeaweedFS is SeaweedFS's all-in-one `weed mini` with its S3 gateway
	// (tools/stores/versions.txt).
	SeaweedFS Kind = "seaweedfs"
	// S3rver is the s3rver emulator from npm (tools/s3rver): it accepts
	// the conditional headers and ignores them, the kind of store s3lock
	// must refuse. It needs node and, the first time, the npm registry.
	S3rver Kind = "s3rver"
)

// Kinds lists every store StartStore runs.
func Kinds() []Kind { return []Kind{Versitygw, MinIO, SeaweedFS, S3rver} }

// ParseKind returns the Kind named s, or an error that lists the kinds.
func ParseKind(s string) (Kind, error) {
	k := Kind(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(Kinds(), k) {
		return k, nil
	}
	names := make([]string, 0, len(Kinds()))
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("s3server: unknown store %q (one of %s)", s, strings.Join(names, ", "))
}

// ErrUnavailable is returned (wrapped, with the reason) by StartStore when a
// store cannot run on this machine at all: its runtime is missing (node for
// s3rver) or its package registry cannot be reached to install it. Tests that
// need such a store skip with the reason; a build failure or a crash of the
// store is another error.
var ErrUnavailable = errors.New("s3server: store unavailable on this machine")

// Credentials are the access key pair a store accepts.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// Store is a running S3-compatible store on loopback, whichever its kind.
// It listens on 127.0.0.1 only and accepts path-style requests signed with
// Credentials in Region.
type Store interface {
	// Kind says which store this is.
	Kind() Kind
	// Version is the store's pinned version (a module version, or the npm
	// package's).
	Version() string
	// URL is the base URL of the S3 API, e.g. http://127.0.0.1:41234.
	URL() string
	// Credentials returns the key pair the store accepts.
	Credentials() Credentials
	// DataDir is the store's directory (StoreOptions.Dir): removing it
	// removes everything the store wrote.
	DataDir() string
	// Logs returns the last part of what the store printed.
	Logs() string
	// Stop terminates the store and waits for it to exit. It is safe to
	// call more than once. The data directory stays.
	Stop()
}

// StoreOptions tune StartStore.
type StoreOptions struct {
	// Dir is the store's directory: its data, and the configuration files
	// it is started with (MinIO, SeaweedFS and s3rver keep their data in
	// Dir/data, versitygw its buckets in Dir itself). A fresh temporary
	// directory when empty. A store started again on the same Dir finds
	// its buckets and objects again (s3test uses that to run a suite twice
	// on one bucket).
	Dir string
	// CertFile and KeyFile, when set, make the store speak HTTPS with this
	// PEM certificate and key, and URL an https:// URL (versitygw and MinIO
	// only; as in Options, the certificate file must hold the CA it chains
	// to).
	CertFile, KeyFile string
	// NoInstall makes StartStore return ErrUnavailable instead of
	// installing s3rver from the npm registry when it is not installed yet,
	// so that a plain test run needs no network but the Go module proxy.
	NoInstall bool
}

// StartStore builds or installs the store of kind (once per machine,
// cached), starts it on a free loopback port with its own credentials and
// waits until it answers an authenticated ListBuckets. The returned store
// must be stopped with Stop. ctx bounds the build and the start.
func StartStore(ctx context.Context, kind Kind, opts StoreOptions) (Store, error) {
	if _, err := ParseKind(string(kind)); err != nil {
		return nil, err
	}
	dir := opts.Dir
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "s3lock-"+string(kind)+"-"); err != nil {
			return nil, fmt.Errorf("s3server: creating data directory: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("s3server: creating data directory: %w", err)
	}
	if kind == Versitygw {
		srv, err := Start(ctx, Options{Dir: dir, CertFile: opts.CertFile, KeyFile: opts.KeyFile})
		if err != nil {
			return nil, err
		}
		return versitygwStore{srv}, nil
	}
	st := storeSpecs[kind]
	if opts.CertFile != "" && st.installCert == nil {
		return nil, fmt.Errorf("s3server: %s is not started with TLS here (versitygw and MinIO are)", kind)
	}
	version, err := st.version()
	if err != nil {
		return nil, err
	}
	prog, err := st.program(ctx, opts)
	if err != nil {
		return nil, err
	}
	// A free port can be taken by someone else between the probe and the
	// store's bind; try a few times.
	var lastErr error
	for range startAttempts {
		s, err := launchStore(ctx, kind, st, prog, version, dir, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// startAttempts is how many times StartStore tries fresh ports.
const startAttempts = 3

// storeSpec says how to run one kind of store other than versitygw.
type storeSpec struct {
	// version returns the pinned version.
	version func() (string, error)
	// program returns the command line that starts the store, before its
	// arguments (building or installing it if needed and allowed).
	program func(ctx context.Context, opts StoreOptions) ([]string, error)
	// ports is how many free ports the store needs (the first is S3's).
	ports int
	// credentials are the key pair the store is started with.
	credentials Credentials
	// command returns the arguments and extra environment that start the
	// store on ports with its data in data; its configuration files go to
	// etc.
	command func(data, etc string, ports []int, creds Credentials) (args, env []string, err error)
	// installCert, for a store that can speak HTTPS, puts the certificate
	// and key where the store started by command reads them from etc; with
	// empty files it removes any that an earlier start put there.
	installCert func(etc, certFile, keyFile string) error
}

var storeSpecs = map[Kind]storeSpec{
	MinIO:     minioSpec,
	SeaweedFS: seaweedSpec,
	S3rver:    s3rverSpec,
}

func launchStore(ctx context.Context, kind Kind, st storeSpec, prog []string, version, dir string, opts StoreOptions) (Store, error) {
	transport, err := trustingTransport(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(st.ports)
	if err != nil {
		return nil, err
	}
	data, etc := filepath.Join(dir, "data"), filepath.Join(dir, "etc")
	for _, d := range []string{data, etc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("s3server: creating %s's directories: %w", kind, err)
		}
	}
	scheme := "http"
	if st.installCert != nil {
		// A certificate left by an earlier start on this Dir would make
		// the store speak HTTPS at an http:// URL: install this start's,
		// or none.
		if err := st.installCert(etc, opts.CertFile, opts.KeyFile); err != nil {
			return nil, fmt.Errorf("s3server: giving %s its certificate: %w", kind, err)
		}
	}
	if transport != nil {
		scheme = "https"
	} else {
		transport = &http.Transport{DisableKeepAlives: true}
	}
	args, env, err := st.command(data, etc, ports, st.credentials)
	if err != nil {
		return nil, err
	}
	argv := append(slices.Clone(prog), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = etc
	cmd.Env = append(os.Environ(), env...)
	p, err := startProcess(string(kind), cmd)
	if err != nil {
		return nil, err
	}
	s := &store{process: p, kind: kind, version: version, dir: dir, creds: st.credentials,
		url: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0]), transport: transport}
	if err := p.waitReady(ctx, readyLimit, s.ready); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// store is a running store other than versitygw.
type store struct {
	*process
	kind    Kind
	version string
	url     string
	dir     string
	creds   Credentials
	// transport is the readiness check's (trusting the store's
	// certificate when it speaks HTTPS).
	transport *http.Transport
}

func (s *store) Kind() Kind               { return s.kind }
func (s *store) Version() string          { return s.version }
func (s *store) URL() string              { return s.url }
func (s *store) Credentials() Credentials { return s.creds }
func (s *store) DataDir() string          { return s.dir }

// ready reports whether the store answers an authenticated ListBuckets: the
// S3 API is up and the credentials are in place (SeaweedFS's gateway listens
// before its filer is reachable).
func (s *store) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyRequestLimit)
	defer cancel()
	client := NewClient(s, &http.Client{Transport: s.transport})
	_, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
	return err
}

// readyRequestLimit bounds one readiness check.
const readyRequestLimit = 2 * time.Second

// NewClient returns an S3 client for st: path-style, st's credentials, in
// Region, without retries (a caller that wants them sets its own retryer).
// httpClient may be nil for the SDK's default.
func NewClient(st Store, httpClient *http.Client) *s3.Client {
	creds := st.Credentials()
	o := s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(st.URL()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, ""),
		Retryer:      aws.NopRetryer{},
	}
	if httpClient != nil {
		o.HTTPClient = httpClient
	}
	return s3.New(o)
}

// versitygwStore is a *Server seen as a Store.
type versitygwStore struct{ *Server }

func (versitygwStore) Kind() Kind { return Versitygw }

func (versitygwStore) Version() string {
	v, err := VersitygwVersion()
	if err != nil {
		return "unknown"
	}
	return v
}

func (s versitygwStore) URL() string     { return s.Endpoint }
func (s versitygwStore) DataDir() string { return s.Dir }

func (versitygwStore) Credentials() Credentials {
	return Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
}

// VersitygwVersion returns the versitygw version pinned in
// tools/versitygw/go.mod.
func VersitygwVersion() (string, error) {
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("s3server: %w", err)
	}
	for line := range strings.SplitSeq(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/versity/versitygw" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("s3server: %s/go.mod does not require github.com/versity/versitygw", dir)
}

// repoDir returns the repository's root, found from this source file.
func repoDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("s3server: cannot locate the source tree")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", ".."), nil
}

// scriptOutput runs one of the repository's build scripts (tools/...) and
// returns the last line it printed on stdout (the path it built), once per
// process and script arguments.
func scriptOutput(ctx context.Context, script string, args ...string) (string, error) {
	key := strings.Join(append([]string{script}, args...), " ")
	scriptMu.Lock()
	r, ok := scriptResults[key]
	if !ok {
		r = &scriptResult{}
		scriptResults[key] = r
	}
	scriptMu.Unlock()
	r.once.Do(func() { r.out, r.err = runScript(ctx, script, args...) })
	return r.out, r.err
}

type scriptResult struct {
	once sync.Once
	out  string
	err  error
}

var (
	scriptMu      sync.Mutex
	scriptResults = map[string]*scriptResult{}
)

func runScript(ctx context.Context, script string, args ...string) (string, error) {
	root, err := repoDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, script)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = buildEnv
	stderr := &testkit.Buffer{Keep: logKeep}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == exitUnavailable {
			return "", fmt.Errorf("%w: %s", ErrUnavailable, strings.TrimSpace(stderr.String()))
		}
		return "", fmt.Errorf("s3server: %s %s: %w: %s", script, strings.Join(args, " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return "", fmt.Errorf("s3server: %s %s printed nothing", script, strings.Join(args, " "))
	}
	return last, nil
}

// exitUnavailable is the exit status with which the build and install
// scripts say that the store cannot be had on this machine (no runtime, no
// registry), as opposed to a failed build.
const exitUnavailable = 3
