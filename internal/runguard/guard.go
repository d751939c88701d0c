package runguard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// guard is the server side: the leases of one run.
type guard struct {
	run Run
	log *log.Logger

	mu          sync.Mutex
	leases      map[string]*held // by bucket and lock name
	conns       map[net.Conn]bool
	orphaned    bool // a provider process outlived terraform
	interrupted bool // terraform was interrupted over a lost lease
}

type held struct {
	lease *s3lock.Lease
	info  Lease
}

// Serve runs a run guard for the terraform process named in args (pid,
// start time, boot id: what Client passes) and returns the process's exit
// code. It returns when the run has ended and its leases are released (or,
// after a killed terraform, left to lapse).
func Serve(args []string) int {
	logger := log.New(os.Stderr, fmt.Sprintf("s3lock run guard %d: ", os.Getpid()), log.LstdFlags|log.Lmicroseconds)
	run, err := parseRun(args)
	if err != nil {
		logger.Print(err)
		return 2
	}
	sock, err := run.socket()
	if err != nil {
		logger.Print(err)
		return 1
	}
	ln, err := listen(sock)
	if err != nil {
		logger.Print(err)
		return 1
	}
	defer os.Remove(sock)
	defer ln.Close()
	g := &guard{run: run, log: logger, leases: map[string]*held{}, conns: map[net.Conn]bool{}}
	logger.Printf("guarding the leases of %s on %s", run, sock)
	go g.accept(ln)
	for run.Alive() {
		time.Sleep(pollInterval)
	}
	g.end()
	return 0
}

func parseRun(args []string) (Run, error) {
	if len(args) != 3 {
		return Run{}, errors.New("usage: " + GuardArg + " PID START BOOT (started by the provider only)")
	}
	pid, err1 := strconv.Atoi(args[0])
	start, err2 := strconv.ParseUint(args[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Run{}, fmt.Errorf("bad run %q: %w", args, err)
	}
	return Run{PID: pid, Start: start, Boot: args[2]}, nil
}

// listen listens on sock, replacing a stale socket left by a dead guard; it
// fails if a live guard already serves the run.
func listen(sock string) (net.Listener, error) {
	ln, err := net.Listen("unix", sock)
	if err == nil {
		return ln, nil
	}
	if c, derr := net.Dial("unix", sock); derr == nil {
		_ = c.Close()
		return nil, fmt.Errorf("another guard already serves %s", sock)
	}
	_ = os.Remove(sock)
	return net.Listen("unix", sock)
}

func (g *guard) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		g.conns[c] = true
		g.mu.Unlock()
		go g.serve(c)
	}
}

// serve answers one provider process's requests until it says goodbye or
// its connection closes.
func (g *guard) serve(c net.Conn) {
	defer func() {
		g.mu.Lock()
		delete(g.conns, c)
		g.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			_ = enc.Encode(response{Error: "bad request: " + err.Error()})
			return
		}
		resp := g.handle(req)
		if err := enc.Encode(resp); err != nil || req.Op == opBye || req.Op == opOrphaned {
			return
		}
	}
}

func (g *guard) handle(req request) response {
	switch req.Op {
	case opAdopt:
		if req.Token == nil || req.Config == nil {
			return response{Error: "adopt needs a token and a client configuration"}
		}
		info, err := g.adopt(*req.Token, *req.Config)
		if err != nil {
			return response{Error: err.Error()}
		}
		return response{Lease: &info}
	case opLookup:
		g.mu.Lock()
		defer g.mu.Unlock()
		if h, ok := g.leases[req.Bucket+"/"+req.Name]; ok {
			info := h.info
			info.ExpiresAt = h.lease.ExpiresAt()
			return response{Lease: &info}
		}
		return response{}
	case opStatus:
		if req.Token == nil {
			return response{Error: "status needs a token"}
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if h, ok := g.leases[req.Token.Bucket+"/"+req.Token.Name]; ok && h.info.Token == *req.Token {
			info := h.info
			info.ExpiresAt = h.lease.ExpiresAt()
			return response{Lease: &info}
		}
		return response{Error: fmt.Sprintf("this run holds no lease of lock %q (epoch %d) in bucket %s", req.Token.Name, req.Token.Epoch, req.Token.Bucket)}
	case opBye:
		return response{}
	case opOrphaned:
		g.mu.Lock()
		g.orphaned = true
		g.mu.Unlock()
		g.log.Print("a provider process outlived terraform (killed?): the leases will lapse, not be released")
		return response{}
	}
	return response{Error: "unknown request " + strconv.Quote(req.Op)}
}

// adopt takes the lease of token over for the rest of the run: it renews it
// and releases it when the run ends.
func (g *guard) adopt(token s3lock.Token, cfg ClientConfig) (Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	awsCfg, err := awsclient.LoadConfig(ctx, cfg.AWS)
	if err != nil {
		return Lease{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	opts := []s3lock.Option{s3lock.WithHolder(cfg.Holder)}
	if cfg.ExpectedBucketOwner != "" {
		opts = append(opts, s3lock.WithExpectedBucketOwner(cfg.ExpectedBucketOwner))
	}
	client, err := s3lock.New(awsclient.S3Client(awsCfg, cfg.AWS), token.Bucket, opts...)
	if err != nil {
		return Lease{}, err
	}
	lease, err := client.Resume(ctx, token)
	if err != nil {
		return Lease{}, err
	}
	info := Lease{Token: token, Key: lease.Key(), Holder: lease.Holder(), AcquiredAt: lease.AcquiredAt(),
		ExpiresAt: lease.ExpiresAt(), Duration: lease.Duration()}
	g.mu.Lock()
	g.leases[token.Bucket+"/"+token.Name] = &held{lease: lease, info: info}
	g.mu.Unlock()
	g.log.Printf("holding lock %q in bucket %s (epoch %d) for the run", token.Name, token.Bucket, token.Epoch)
	go g.watch(token.Bucket+"/"+token.Name, lease)
	return info, nil
}

// watch waits for a lease to end; a lease lost during the run interrupts
// terraform.
func (g *guard) watch(key string, lease *s3lock.Lease) {
	<-lease.Done()
	err := lease.Err()
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		return
	}
	g.mu.Lock()
	if h, ok := g.leases[key]; ok {
		h.info.Lost = err.Error()
	}
	first := !g.interrupted
	g.interrupted = true
	g.mu.Unlock()
	g.log.Printf("lease lost: %v", err)
	if first && g.run.Alive() {
		g.interrupt(lease, err)
	}
}

// interrupt tells terraform that the run's lease was lost, on its standard
// error, and interrupts it as Ctrl-C does, so that it starts no further
// changes.
func (g *guard) interrupt(lease *s3lock.Lease, err error) {
	msg := fmt.Sprintf("\ns3lock: the lease on lock %q in bucket %s (epoch %d) was lost during this run: %v\n"+
		"s3lock: interrupting terraform (as Ctrl-C does) so that it starts no further changes; "+
		"the changes this run made may not have been exclusive.\n\n", lease.Name(), lease.Bucket(), lease.Epoch(), err)
	if f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", g.run.PID), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		_, _ = f.WriteString(msg)
		_ = f.Close()
	}
	if err := interruptProcess(g.run.PID); err != nil {
		g.log.Printf("interrupting %s: %v", g.run, err)
	}
}

// end settles the run's leases once terraform is gone: released, unless a
// provider process outlived terraform (terraform was killed), in which case
// they are left to lapse.
func (g *guard) end() {
	deadline := time.Now().Add(orphanWait)
	for {
		g.mu.Lock()
		open, orphaned := len(g.conns), g.orphaned
		g.mu.Unlock()
		if open == 0 || orphaned || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollInterval / 4)
	}
	g.mu.Lock()
	lapse := g.orphaned || len(g.conns) > 0
	leases := g.leases
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range leases {
		l := h.lease
		if lapse {
			l.Detach()
			g.log.Printf("terraform was killed while its providers ran: leaving lock %q in bucket %s (epoch %d) to lapse after %s",
				l.Name(), l.Bucket(), l.Epoch(), l.Duration())
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			defer cancel()
			if err := l.Release(ctx); err != nil && !errors.Is(err, s3lock.ErrLeaseLost) {
				g.log.Printf("releasing lock %q in bucket %s (epoch %d): %v; it lapses after %s", l.Name(), l.Bucket(), l.Epoch(), err, l.Duration())
				return
			}
			g.log.Printf("the run ended: released lock %q in bucket %s (epoch %d)", l.Name(), l.Bucket(), l.Epoch())
		})
	}
	wg.Wait()
}
