package runguard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Client is a provider process's line to its run's guard. It connects (and
// starts the guard) on first use; it is safe for concurrent use, one request
// at a time.
type Client struct {
	run Run

	mu   sync.Mutex // one request at a time
	conn net.Conn
	r    *bufio.Reader
}

// NewClient returns the client for the run; nothing happens until it is
// used.
func NewClient(run Run) *Client { return &Client{run: run} }

// Run returns the run the client belongs to.
func (c *Client) Run() Run { return c.run }

// Claim asks for the run's lease of the lock on the store cfg names: the
// lease if the run holds it (possibly lost), or nil, granting this process
// the right to acquire it; then it must Adopt the lease or Abandon the
// claim. While another provider process of the run has that right, Claim
// waits (ctx bounds the wait). It starts the run's guard if there is none.
func (c *Client) Claim(ctx context.Context, cfg ClientConfig, bucket, name string) (*Lease, error) {
	resp, err := c.call(ctx, request{Op: opClaim, Bucket: bucket, Name: name, Config: &cfg}, true)
	if err == nil && resp.Lease == nil && !resp.Granted {
		err = errors.New("runguard: the run guard answered a claim with neither a lease nor a grant")
	}
	return resp.Lease, err
}

// Adopt hands the guard a lease this process just acquired (and detached)
// after a granted Claim: the guard renews it and releases it when the run
// ends.
func (c *Client) Adopt(ctx context.Context, t s3lock.Token, cfg ClientConfig) (*Lease, error) {
	return c.need(c.call(ctx, request{Op: opAdopt, Token: &t, Config: &cfg}, false))
}

// Abandon gives up a granted Claim whose acquisition failed.
func (c *Client) Abandon(ctx context.Context, cfg ClientConfig, bucket, name string) error {
	_, err := c.call(ctx, request{Op: opAbandon, Bucket: bucket, Name: name, Config: &cfg}, false)
	return err
}

// Status returns the run's lease of the token, with its current deadline
// and, if it was lost, why.
func (c *Client) Status(ctx context.Context, t s3lock.Token) (*Lease, error) {
	return c.need(c.call(ctx, request{Op: opStatus, Token: &t}, false))
}

// Bye tells the guard that this provider process is shutting down cleanly
// (Terraform stopped it at the end of a phase). It does nothing if the
// process never talked to the guard.
func (c *Client) Bye(ctx context.Context) error { return c.farewell(ctx, opBye) }

// Orphaned tells the guard that this provider process outlived terraform,
// which was killed: the run's leases must lapse rather than be released.
func (c *Client) Orphaned(ctx context.Context) error { return c.farewell(ctx, opOrphaned) }

func (c *Client) farewell(ctx context.Context, op string) error {
	if !c.mu.TryLock() {
		// A request is in flight (an adopt, a claim waiting for another
		// process): do not wait for it; closing the connection without a
		// goodbye tells the guard the same, and lets the leases lapse.
		return nil
	}
	dialed := c.conn != nil
	c.mu.Unlock()
	if !dialed {
		return nil
	}
	_, err := c.call(ctx, request{Op: op}, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	return err
}

func (c *Client) need(resp response, err error) (*Lease, error) {
	if err == nil && resp.Lease == nil {
		err = errors.New("runguard: the run guard answered without a lease")
	}
	return resp.Lease, err
}

// call sends one request and reads its answer.
// Only a claim may start the guard (mayStart): any other request needs the
// guard that the claim found or started, and fails if it is gone (it died
// mid-run: its leases are no longer renewed).
func (c *Client) call(ctx context.Context, req request, mayStart bool) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		if err := c.dial(ctx, mayStart); err != nil {
			return response{}, err
		}
	}
	d, ok := ctx.Deadline()
	switch {
	case req.Op == opClaim && !ok:
		d = time.Time{} // it may wait for another provider process's acquisition
	case !ok || time.Until(d) > requestTimeout:
		d = time.Now().Add(requestTimeout)
	}
	_ = c.conn.SetDeadline(d)
	fail := func(err error) (response, error) {
		_ = c.conn.Close()
		c.conn = nil
		return response{}, fmt.Errorf("runguard: talking to the run guard of %s: %w", c.run, err)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return response{}, err
	}
	if len(b) >= maxLine {
		return response{}, fmt.Errorf("runguard: the %s request is %d bytes, more than the run guard reads (%d)", req.Op, len(b), maxLine)
	}
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return fail(err)
	}
	line, err := readLine(c.r)
	if err != nil {
		return fail(err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return fail(err)
	}
	if resp.Error != "" {
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

// dial connects to the run's guard, starting it if there is none and
// mayStart. Starting is serialized between the run's provider processes by
// a lock file next to the socket, so one guard serves a run.
func (c *Client) dial(ctx context.Context, mayStart bool) error {
	sock, err := c.run.socket()
	if err != nil {
		return err
	}
	var refused error
	connect := func() bool {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return false
		}
		if refused = checkGuard(conn, sock); refused == nil {
			refused = c.hello(conn)
		}
		if refused != nil {
			_ = conn.Close()
			return true
		}
		c.conn, c.r = conn, newLineReader(conn)
		return true
	}
	if connect() {
		return refused
	}
	if !mayStart {
		return fmt.Errorf("runguard: the run guard of %s is gone (see %s): the run's leases are no longer renewed", c.run, logPath(sock))
	}
	unlock, err := lockFile(sock + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if connect() { // another process started it meanwhile
		return refused
	}
	if err := c.start(sock); err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for !connect() {
		if time.Now().After(deadline) {
			return fmt.Errorf("runguard: the run guard of %s did not start listening on %s within %s (see %s)",
				c.run, sock, startTimeout, logPath(sock))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval / 4):
		}
	}
	return refused
}

// checkGuard makes sure that the process at the other end of conn, the
// guard at sock, runs as this process's user (the kernel's peer
// credentials, as the guard checks its clients): the requests carry the
// run's lease tokens, the AWS credentials and the SSE-C key. The socket's
// directory is the user's own (dir), so only root could have put another
// user's socket there. Where the kernel's peer credentials cannot be read
// (systems other than Linux and macOS, where ForProvider has failed first),
// it refuses every guard.
func checkGuard(conn net.Conn, sock string) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("runguard: %s: a %T is not a unix socket connection", sock, conn)
	}
	_, uid, err := peerOf(uc)
	if err != nil {
		return fmt.Errorf("runguard: checking who serves %s: %w", sock, err)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("runguard: %s is served by a process of user %d, not of this user (%d): "+
			"refusing to hand it the run's leases and credentials", sock, uid, os.Getuid())
	}
	return nil
}

// hello names the client's run to the guard at the other end of conn, which
// refuses a provider of another run (and any process not of its run).
func (c *Client) hello(conn net.Conn) error {
	_ = conn.SetDeadline(time.Now().Add(requestTimeout))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	b, err := json.Marshal(request{Op: opHello, Run: &c.run})
	if err != nil {
		return err
	}
	// A guard that refuses this process answers before it reads: read its
	// answer even when the greeting could not be written.
	_, werr := conn.Write(append(b, '\n'))
	line, err := readLine(newLineReader(conn))
	if err != nil {
		return fmt.Errorf("runguard: greeting the run guard of %s: %w", c.run, errors.Join(werr, err))
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return fmt.Errorf("runguard: greeting the run guard of %s: %w", c.run, err)
	}
	if resp.Error != "" {
		return fmt.Errorf("runguard: the guard at %s refused this provider: %s", conn.RemoteAddr(), resp.Error)
	}
	return nil
}

// start starts the run's guard: this executable with GuardArg, in a session
// of its own (a Ctrl-C in terraform's terminal or a CI runner's signal to
// its process group must not reach it: it ends with the run), logging to a
// file next to its socket.
func (c *Client) start(sock string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("runguard: locating the provider executable to start the run guard: %w", err)
	}
	logFile, err := os.OpenFile(logPath(sock), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("runguard: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(self, append([]string{GuardArg}, c.run.args()...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile // stdin: /dev/null
	// It runs in another directory: the files the AWS variables name (the
	// SDK reads AWS_CONFIG_FILE and the like itself) must be absolute. The
	// options it is sent are resolved already (awsclient.Options.Resolved).
	cmd.Dir, cmd.Env = filepath.Dir(sock), awsclient.AbsoluteEnviron(os.Environ())
	cmd.SysProcAttr = newSession()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("runguard: starting the run guard: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it ends while this process lives
	return nil
}

func logPath(sock string) string { return strings.TrimSuffix(sock, ".sock") + ".log" }
