//go:build linux

package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
)

const (
	// storeHealthyWithin bounds a start of versitygw: it is up in well under
	// a second, unless the machine is starved.
	storeHealthyWithin = 30 * time.Second
	// healthPoll is how often a starting store is asked whether it is up.
	healthPoll = 20 * time.Millisecond
)

// store is the versitygw server of one run, on a port and a data directory
// that survive its restarts: killed with SIGKILL (no chance to flush or say
// goodbye) and started again on the same directory and port, so clients
// reconnect to the same endpoint and find their objects.
type store struct {
	Endpoint string
	bin, dir string
	addr     string
	log      *os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// startStore starts versitygw (built from the pinned module, as
// internal/s3server does) on a free loopback port with its buckets in dir.
func startStore(ctx context.Context, dir string, log *os.File) (*store, error) {
	bin, err := s3server.Binary(ctx)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	s := &store{Endpoint: "http://" + addr, bin: bin, dir: dir, addr: addr, log: log}
	return s, s.start(ctx)
}

// start launches the server and waits until it answers its health check.
func (s *store) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, "--port", s.addr, "--health", "/health", "--quiet", "posix", s.dir)
	cmd.Env = append(os.Environ(),
		"ROOT_ACCESS_KEY_ID="+s3server.AccessKeyID,
		"ROOT_SECRET_ACCESS_KEY="+s3server.SecretAccessKey)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting versitygw: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	return s.waitHealthy(ctx, exited)
}

func (s *store) waitHealthy(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, storeHealthyWithin)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("versitygw exited before it was ready (see %s)", s.log.Name())
		case <-ctx.Done():
			return fmt.Errorf("versitygw at %s not healthy after %s (see %s)", s.Endpoint, storeHealthyWithin, s.log.Name())
		case <-time.After(healthPoll):
		}
	}
}

// kill kills the server with SIGKILL and waits until it is gone.
func (s *store) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// restart kills the server, leaves it down for down, and starts it again
// on the same port and data directory.
func (s *store) restart(ctx context.Context, down time.Duration) error {
	s.kill()
	time.Sleep(down)
	return s.start(ctx)
}
