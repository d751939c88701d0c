package s3server

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
)

// Timings of a store process's life.
const (
	// readyLimit bounds how long a started store may take to answer its
	// readiness check. versitygw and s3rver are ready in well under a
	// second, MinIO in one or two; SeaweedFS's `weed mini` starts a master,
	// a volume server, a filer and the S3 gateway one after the other and
	// has taken up to 20 s on a loaded 2-core machine.
	readyLimit = 90 * time.Second
	// readyPoll is the pause between two readiness checks.
	readyPoll = 20 * time.Millisecond
	// stopGrace is how long Stop waits after SIGINT before it kills the
	// process: long enough for a store to flush and exit cleanly.
	stopGrace = 5 * time.Second
	// logKeep is how much of a store's output is kept to explain a
	// failure (the last part of it).
	logKeep = 64 << 10
)

// process is a store's running server process, its output and its exit.
type process struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logs    *testkit.Buffer
	stop    sync.Once
}

// startProcess starts cmd, collecting its output, with the parent-death
// signal set so that a crashed test binary leaves no server behind. name is
// the store's name for errors.
func startProcess(name string, cmd *exec.Cmd) (*process, error) {
	logs := &testkit.Buffer{Keep: logKeep}
	cmd.Stdout = logs
	cmd.Stderr = logs
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("s3server: starting %s (%s): %w", name, cmd.Path, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), logs: logs}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady calls ready until it returns nil, the process exits, or limit
// (or ctx) ends; the error then carries the process's output.
func (p *process) waitReady(ctx context.Context, limit time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("s3server: %s exited before it was ready (%w): %s", p.name, p.waitErr, p.logs.String())
		case <-ctx.Done():
			return fmt.Errorf("s3server: %s not ready after %s (last check: %w): %s", p.name, limit, last, p.logs.String())
		case <-time.After(readyPoll):
		}
	}
}

// Stop terminates the process (SIGINT, then SIGKILL after stopGrace) and
// waits for it to exit. It is safe to call more than once.
func (p *process) Stop() {
	p.stop.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// Exited returns a channel that is closed when the process has exited,
// stopped or not.
func (p *process) Exited() <-chan struct{} { return p.exited }

// Logs returns the last part of what the process printed so far.
func (p *process) Logs() string { return p.logs.String() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("s3server: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePorts returns n distinct free loopback ports, all probed at once so
// that none of them is handed out twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("s3server: finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
