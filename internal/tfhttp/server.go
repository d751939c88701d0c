// Package tfhttp serves Terraform's http backend (`backend "http" {}`, GA in
// every Terraform and OpenTofu release) over the states of internal/tfstate:
// a state lock that lapses when its holder dies, waits in the lock's line,
// and state writes fenced by the lock's epoch (PROTOCOL.md §15). It speaks
// the backend's REST protocol — GET, POST with ?ID=, LOCK and UNLOCK with
// Terraform's lock info, 423 with the holder's lock info — and knows
// nothing of the command line: `s3lock backend run` and `s3lock backend
// serve` only start it.
//
// Each lock Terraform takes is taken by a tfstate.Store of its own (one
// s3lock lease, one Terraform process), so that two Terraform processes
// served by one server wait for each other as two processes would. A grant
// is such a lock, named by the lock ID Terraform chose; state writes carry
// that ID, and only a grant's store writes under it.
package tfhttp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Config is what a server serves and how.
type Config struct {
	// API is the S3 client of the states; NewClient builds the s3lock
	// client of one lock (each lock has a store of its own).
	API       s3lock.S3API
	NewClient func() (*s3lock.Client, error)
	// State is the template of every state's store: Bucket, Lease, Wait,
	// Order, Objects, ExpectedBucketOwner, Now. The server sets Key (the
	// state object's key, from the URL), Who (from Terraform's lock info),
	// LockFile (always: the S3 backend's lock file is held too),
	// WaitObserver and OnLost.
	State tfstate.Config
	// Key, if set, is the only state object served (s3lock backend run);
	// "" serves any key in the URL (s3lock backend serve).
	Key string
	// Credentials every request must carry (basic auth).
	Credentials Credentials
	// ForceUnlockID is the lock ID of an UNLOCK that carries none
	// (Terraform's and OpenTofu's force-unlock send an empty body): s3lock
	// backend run takes it from its command line. "": such an UNLOCK is
	// refused, unless its URL has ?ID=.
	ForceUnlockID string
	// MaxHold, if set, releases a lock held longer than this (a client
	// that vanished while holding it); its writes are refused from then on.
	MaxHold time.Duration
	// Log, if set, gets one line for each event a user should hear of: a
	// lock given up on, a write or unlock refused and why, a lock lost.
	Log func(msg string)
	// Progress, if set, starts the report of a LOCK that waits for the
	// state's s3lock lock (at most limit), returning the wait observer and
	// its stop.
	Progress func(lock string, limit time.Duration) (observe func(held error), stop func())
}

// Server serves Terraform's http backend. Its zero value is not usable:
// make one with New.
type Server struct {
	cfg  Config
	http *http.Server

	// waits is cancelled by Interrupt and Shutdown: LOCKs that wait stop.
	waits     context.Context
	interrupt context.CancelFunc

	mu     sync.Mutex
	grants map[string]*grant // by Terraform's lock ID
	closed bool              // Shutdown began: no new grants
	onLost func(state string, err error)

	lastUnauthorized time.Time   // under mu
	served           atomic.Bool // a request with the credentials came
}

// OnLost makes fn be called when a lock held for a client ends other than
// by its UNLOCK or the server's own release (lost, ran out, force-released
// by another process): the client's writes are refused from then on.
func (s *Server) OnLost(fn func(state string, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLost = fn
}

// Timeouts of the server's connections. A LOCK waits for as long as the
// lock's wait allows, so responses have no write timeout.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// New checks the configuration and returns a server; Serve starts it.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.API == nil || cfg.NewClient == nil:
		return nil, errors.New("tfhttp: no S3 client")
	case cfg.Credentials.Username == "" || cfg.Credentials.Password == "":
		return nil, errors.New("tfhttp: no credentials: every request must carry a user and password")
	case strings.ContainsRune(cfg.Credentials.Username, ':'):
		return nil, fmt.Errorf("tfhttp: the user name %q contains \":\", which basic auth cannot carry", cfg.Credentials.Username)
	}
	if cfg.Key != "" {
		if err := tfstate.ValidateKey(cfg.Key); err != nil {
			return nil, err
		}
	}
	if cfg.Log == nil {
		cfg.Log = func(string) {}
	}
	s := &Server{cfg: cfg, grants: map[string]*grant{}}
	s.waits, s.interrupt = context.WithCancel(context.Background())
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
		ErrorLog: nil}
	return s, nil
}

// Serve serves on l until Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve(l net.Listener) error { return s.http.Serve(l) }

// ServeTLS is Serve over TLS with the certificate and key files given.
func (s *Server) ServeTLS(l net.Listener, certFile, keyFile string) error {
	return s.http.ServeTLS(l, certFile, keyFile)
}

// Interrupt makes every LOCK that waits stop waiting (its client was
// interrupted: Terraform cannot cancel a request it sent) and every later
// LOCK fail at once; the server goes on serving reads, writes and unlocks.
func (s *Server) Interrupt() { s.interrupt() }

// Shutdown stops the server: waits end, requests in flight finish (until
// ctx ends), and then every lock still held for a client is released —
// its client is gone or can no longer reach the server, so nothing will
// write under it. It returns the errors of those releases.
func (s *Server) Shutdown(ctx context.Context) error {
	s.interrupt()
	serr := s.http.Shutdown(ctx)
	s.mu.Lock()
	s.closed = true
	var live, lost []*grant
	for _, g := range s.grants {
		if g.end(errServerStopped) {
			live = append(live, g)
		} else if g.lost {
			lost = append(lost, g)
		}
	}
	s.mu.Unlock()
	for _, g := range lost {
		s.removeLockFile(g)
	}
	var errs []error
	for _, g := range live {
		if err := g.unlock(); err != nil {
			errs = append(errs, fmt.Errorf("releasing the lock of s3://%s/%s (lock ID %s): %w", s.cfg.State.Bucket, g.key, g.lockID, err))
			continue
		}
		s.cfg.Log(fmt.Sprintf("released the state lock of s3://%s/%s (lock ID %s, %s), still held when the backend stopped: "+
			"nothing can write under it any more", s.cfg.State.Bucket, g.key, g.lockID, whoText(g.info)))
	}
	if errors.Is(serr, context.DeadlineExceeded) || errors.Is(serr, context.Canceled) {
		errs = append(errs, fmt.Errorf("requests still in flight when the server stopped: %w", serr))
	}
	return errors.Join(errs...)
}

// removeLockFile removes what a lost lock may have left, the S3 backend's
// lock file (the store's own attempt, as the lease was lost, may have found
// the store unreachable), and says so if it cannot.
func (s *Server) removeLockFile(g *grant) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := g.store.RemoveLockFile(ctx, tfstate.DefaultWorkspace, g.lockID); err != nil {
		s.cfg.Log(fmt.Sprintf("could not remove the S3 backend's lock file of the lost lock ID %s of s3://%s/%s (%v): runs of the s3 "+
			"backend find the state locked until the next run through s3lock locks it%s", g.lockID, s.cfg.State.Bucket, g.key, err,
			s.forceHint(g.key, g.lockID)))
	}
}

// ServeHTTP checks the credentials and the state's key and routes the
// request by method.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		s.unauthorized(r)
		w.Header().Set("WWW-Authenticate", `Basic realm="s3lock backend", charset="UTF-8"`)
		reply(w, http.StatusUnauthorized, "s3lock backend: this endpoint needs the user and password it was started with "+
			"(TF_HTTP_USERNAME and TF_HTTP_PASSWORD)")
		return
	}
	s.served.Store(true)
	key, err := s.stateKey(r.URL.Path)
	if err != nil {
		status := http.StatusNotFound
		if errors.Is(err, tfstate.ErrInvalidConfig) {
			status = http.StatusBadRequest
		}
		reply(w, status, "s3lock backend: "+strings.TrimPrefix(err.Error(), tfstate.ErrInvalidConfig.Error()+": "))
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, r, key)
	case http.MethodPost, http.MethodPut:
		s.put(w, r, key)
	case MethodLock:
		s.lock(w, r, key)
	case MethodUnlock:
		s.unlock(w, r, key)
	default:
		w.Header().Set("Allow", "GET, POST, PUT, LOCK, UNLOCK")
		reply(w, http.StatusMethodNotAllowed, fmt.Sprintf("s3lock backend: %s is not served: states are read with GET, written "+
			"with POST (or PUT), locked with LOCK and UNLOCK; a state is never deleted through this endpoint (Terraform's "+
			"http backend has no workspaces to delete): delete s3://%s/%s in S3 if you mean to", tfstate.Printable(r.Method), s.cfg.State.Bucket, key))
	}
}

// unauthorized reports a request refused for its credentials, at most once
// per unauthorizedLogEvery: a client probing the endpoint must not flood
// the log.
func (s *Server) unauthorized(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.lastUnauthorized) < unauthorizedLogEvery {
		return
	}
	s.lastUnauthorized = time.Now()
	s.cfg.Log(fmt.Sprintf("refused a request from %s without the credentials it was started with (401)", tfstate.Printable(r.RemoteAddr)))
}

// unauthorizedLogEvery bounds how often refused credentials are reported.
const unauthorizedLogEvery = 10 * time.Second

// Served reports whether a request with the credentials reached the
// server: a command that made none never used the backend (its
// configuration may lack backend "http" {}).
func (s *Server) Served() bool { return s.served.Load() }

// authorized checks basic auth in constant time.
func (s *Server) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	u := subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.Credentials.Username))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.Credentials.Password))
	return ok && u&p == 1
}

// stateKey is the state object's key a path names.
func (s *Server) stateKey(path string) (string, error) {
	key, ok := strings.CutPrefix(path, StatePath)
	switch {
	case !ok:
		return "", fmt.Errorf("no state at %q: states are served at %sKEY, where KEY is the state object's key in s3://%s",
			tfstate.Printable(path), StatePath, s.cfg.State.Bucket)
	case s.cfg.Key != "" && key != s.cfg.Key:
		return "", fmt.Errorf("this endpoint serves only the state s3://%s/%s (at %s%s), not %q",
			s.cfg.State.Bucket, s.cfg.Key, StatePath, s.cfg.Key, tfstate.Printable(key))
	}
	if err := tfstate.ValidateKey(key); err != nil {
		return "", fmt.Errorf("%w: the URL's state key: %s", tfstate.ErrInvalidConfig,
			strings.TrimPrefix(err.Error(), tfstate.ErrInvalidConfig.Error()+": "))
	}
	return key, nil
}

// store is a new store of the state at key: one per lock, and one for each
// read or write without a lock.
func (s *Server) store(key string, cfg tfstate.Config) (*tfstate.Store, error) {
	c, err := s.cfg.NewClient()
	if err != nil {
		return nil, err
	}
	cfg.Bucket, cfg.Key, cfg.WorkspaceKeyPrefix, cfg.LockFile = s.cfg.State.Bucket, key, "", true
	return tfstate.New(s.cfg.API, c, cfg)
}

// reply writes a status and a one-line text body (for curl; Terraform
// shows only the status).
func reply(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, msg)
}
