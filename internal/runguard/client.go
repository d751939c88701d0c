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
	"strconv"
	"strings"
	"sync"
	"time"

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

	keysMu sync.Mutex
	keys   map[string]*sync.Mutex
}

// NewClient returns the client for the run; nothing happens until it is
// used.
func NewClient(run Run) *Client { return &Client{run: run, keys: map[string]*sync.Mutex{}} }

// Run returns the run the client belongs to.
func (c *Client) Run() Run { return c.run }

// Lock serializes, within this process, the opening of one lock's lease, so
// that two ephemeral resources of one lock in one run share its lease
// instead of the second waiting for the first. It returns the unlock.
func (c *Client) Lock(bucket, name string) func() {
	c.keysMu.Lock()
	m, ok := c.keys[bucket+"/"+name]
	if !ok {
		m = &sync.Mutex{}
		c.keys[bucket+"/"+name] = m
	}
	c.keysMu.Unlock()
	m.Lock()
	return m.Unlock
}

// Lookup returns the run's lease of the lock, or nil if the run holds none.
func (c *Client) Lookup(ctx context.Context, bucket, name string) (*Lease, error) {
	resp, err := c.call(ctx, request{Op: opLookup, Bucket: bucket, Name: name})
	return resp.Lease, err
}

// Adopt hands the guard a lease this process just acquired (and detached):
// the guard renews it and releases it when the run ends.
func (c *Client) Adopt(ctx context.Context, t s3lock.Token, cfg ClientConfig) (*Lease, error) {
	return c.need(c.call(ctx, request{Op: opAdopt, Token: &t, Config: &cfg}))
}

// Status returns the run's lease of the token, with its current deadline
// and, if it was lost, why.
func (c *Client) Status(ctx context.Context, t s3lock.Token) (*Lease, error) {
	return c.need(c.call(ctx, request{Op: opStatus, Token: &t}))
}

// Bye tells the guard that this provider process is shutting down cleanly
// (Terraform stopped it at the end of a phase). It does nothing if the
// process never talked to the guard.
func (c *Client) Bye(ctx context.Context) error { return c.farewell(ctx, opBye) }

// Orphaned tells the guard that this provider process outlived terraform,
// which was killed: the run's leases must lapse rather than be released.
func (c *Client) Orphaned(ctx context.Context) error { return c.farewell(ctx, opOrphaned) }

func (c *Client) farewell(ctx context.Context, op string) error {
	c.mu.Lock()
	dialed := c.conn != nil
	c.mu.Unlock()
	if !dialed {
		return nil
	}
	_, err := c.call(ctx, request{Op: op})
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
func (c *Client) call(ctx context.Context, req request) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		if err := c.dial(ctx); err != nil {
			return response{}, err
		}
	}
	if d, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(d)
	} else {
		_ = c.conn.SetDeadline(time.Now().Add(requestTimeout))
	}
	fail := func(err error) (response, error) {
		_ = c.conn.Close()
		c.conn = nil
		return response{}, fmt.Errorf("runguard: talking to the run guard of %s: %w", c.run, err)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return response{}, err
	}
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return fail(err)
	}
	line, err := c.r.ReadBytes('\n')
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

// dial connects to the run's guard, starting it if there is none.
func (c *Client) dial(ctx context.Context) error {
	sock, err := c.run.socket()
	if err != nil {
		return err
	}
	if conn, err := net.Dial("unix", sock); err == nil {
		c.conn, c.r = conn, bufio.NewReader(conn)
		return nil
	}
	if err := c.start(sock); err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			c.conn, c.r = conn, bufio.NewReader(conn)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("runguard: the run guard of %s did not start listening on %s within %s (see %s): %w",
				c.run, sock, startTimeout, logPath(sock), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval / 4):
		}
	}
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
	cmd := exec.Command(self, GuardArg, strconv.Itoa(c.run.PID), strconv.FormatUint(c.run.Start, 10), c.run.Boot)
	cmd.Stdout, cmd.Stderr = logFile, logFile // stdin: /dev/null
	cmd.Dir = filepath.Dir(sock)
	cmd.SysProcAttr = newSession()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("runguard: starting the run guard: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it ends while this process lives
	return nil
}

func logPath(sock string) string { return strings.TrimSuffix(sock, ".sock") + ".log" }
