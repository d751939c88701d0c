package runguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// guard is the server side: the leases of one run.
type guard struct {
	run   Run
	log   *log.Logger
	state string // file listing the leases held, for a guard that replaces a dead one

	mu          sync.Mutex
	leases      map[string]*held         // by leaseKey
	claims      map[string]chan struct{} // granted claims, closed when resolved
	conns       map[net.Conn]*conn
	unclean     bool // a provider process went away without saying goodbye, or outlived terraform
	interrupted bool // terraform was interrupted over a lost lease
}

type held struct {
	lease *s3lock.Lease // nil for a lease a dead guard held
	info  Lease
}

// conn is what the guard knows of one provider process's connection.
type conn struct {
	greeted bool            // it named this guard's run (hello): a provider process of the run
	working bool            // it made a request after its hello, as a provider process does
	bye     bool            // it said goodbye: Terraform shut it down cleanly
	claims  map[string]bool // claims it was granted and has not resolved
}

// Serve runs a run guard for the terraform process named in args (pid,
// start time, boot id, pid namespace: Run.args) and returns the process's exit
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
	pruneLogs(filepath.Dir(sock))
	ln, err := listen(sock)
	if err != nil {
		logger.Print(err)
		return 1
	}
	g := &guard{run: run, log: logger, state: strings.TrimSuffix(sock, ".sock") + ".state",
		leases: map[string]*held{}, claims: map[string]chan struct{}{}, conns: map[net.Conn]*conn{}}
	g.inherit()
	logger.Printf("guarding the leases of %s on %s", run, sock)
	if why := run.EndsWithTerraform(); why != "" {
		logger.Printf("%s: when it exits, the kernel ends this guard with it, so the run's leases lapse after their "+
			"duration instead of being released", why)
	}
	go g.accept(ln)
	tree := newTreeWatch(run)
	for tree.running() {
		time.Sleep(pollInterval)
	}
	_ = ln.Close()
	_ = os.Remove(sock)
	killed := tree.outlived()
	if killed != "" {
		logger.Printf("terraform is gone but %s is still running: terraform was killed", killed)
	}
	lapsed := g.end(killed != "")
	_ = os.Remove(g.state)
	if !lapsed && !g.lost() {
		_ = os.Remove(logPath(sock)) // nothing worth keeping
	}
	return 0
}

// listen listens on sock, replacing a stale socket left by a dead guard. The
// provider that starts a guard holds the run's start lock (Client.dial), so
// no other guard of the run starts meanwhile.
func listen(sock string) (net.Listener, error) {
	if c, err := net.Dial("unix", sock); err == nil {
		_ = c.Close()
		return nil, fmt.Errorf("another guard already serves %s", sock)
	}
	_ = os.Remove(sock)
	return net.Listen("unix", sock)
}

// inherit takes over the record of a guard of this run that died: the
// leases it held are reported lost (nobody renewed them meanwhile), so that
// the run fails instead of taking a second epoch.
func (g *guard) inherit() {
	b, err := os.ReadFile(g.state)
	if err != nil {
		return
	}
	var prev map[string]Lease
	if err := json.Unmarshal(b, &prev); err != nil {
		return
	}
	for key, info := range prev {
		info.Lost = "the run's lock guard stopped while holding this lease (was it killed?), so nobody renewed it"
		g.leases[key] = &held{info: info}
		g.log.Printf("a previous guard of this run died holding lock %q in bucket %s (epoch %d)", info.Token.Name, info.Token.Bucket, info.Token.Epoch)
	}
}

// record writes the leases held to the state file. Called with g.mu held.
func (g *guard) record() {
	out := map[string]Lease{}
	for key, h := range g.leases {
		if h.lease != nil {
			out[key] = h.info
		}
	}
	b, _ := json.Marshal(out)
	tmp := g.state + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		_ = os.Rename(tmp, g.state)
	}
}

func (g *guard) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if err := g.admit(c); err != nil {
			g.log.Printf("refused a connection: %v", err)
			_ = json.NewEncoder(c).Encode(response{Error: err.Error()})
			_ = c.Close()
			continue
		}
		g.mu.Lock()
		g.conns[c] = &conn{claims: map[string]bool{}}
		g.mu.Unlock()
		go g.serve(c)
	}
}

// admit accepts a connection only from a provider process of this run: a
// process of the guard's user whose parent is the run's terraform (the
// kernel's peer credentials say who connected). A provider of another run
// that reached this socket, or any other process, is refused.
func (g *guard) admit(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("a %T is not a unix socket connection", c)
	}
	pid, uid, err := peerOf(uc)
	if err != nil {
		return err
	}
	if uid != os.Getuid() {
		return fmt.Errorf("the run guard of %s serves user %d only, not a process of user %d", g.run, os.Getuid(), uid)
	}
	if pid <= 0 {
		return fmt.Errorf("the run guard of %s serves that run's provider processes only, not a process of another pid namespace", g.run)
	}
	p, err := procOf(pid)
	if err != nil {
		return fmt.Errorf("the run guard of %s: reading the connecting process %d: %w", g.run, pid, err)
	}
	if p.PPID == g.run.PID && g.run.Alive() {
		return nil
	}
	if acceptRunAncestors && ancestorOf(pid, g.run.PID) {
		return nil
	}
	return fmt.Errorf("the run guard of %s serves that run's provider processes only: process %d is a child of process %d, not of terraform",
		g.run, pid, p.PPID)
}

// acceptRunAncestors also admits the ancestors of the run's terraform. Only
// this package's tests set it (in the guard processes they start), where the
// test process plays the provider and a process it started plays terraform.
var acceptRunAncestors bool

// ancestorOf reports whether process a is an ancestor of process pid.
func ancestorOf(a, pid int) bool {
	for range maxAncestors {
		p, err := procOf(pid)
		if err != nil || p.PPID <= 0 {
			return false
		}
		if p.PPID == a {
			return true
		}
		pid = p.PPID
	}
	return false
}

// serve answers one provider process's requests until its connection
// closes. A connection that made requests and closes without a goodbye
// means its provider process died (killed with terraform, or after it):
// the run is unclean (see the package's doc for why its leases then lapse).
// A line longer than maxLine is refused unread and ends the connection.
func (g *guard) serve(c net.Conn) {
	defer func() {
		g.mu.Lock()
		st := g.conns[c]
		delete(g.conns, c)
		for key := range st.claims {
			g.resolveLocked(key)
		}
		if st.working && !st.bye {
			g.unclean = true
			g.log.Print("a provider process went away without a goodbye (killed?): the run's leases will lapse, not be released")
		}
		g.mu.Unlock()
		_ = c.Close()
	}()
	r := newLineReader(c)
	enc := json.NewEncoder(c)
	for {
		line, err := readLine(r)
		if errors.Is(err, errLineTooLong) {
			g.log.Printf("refused a request: %v", err)
			_ = enc.Encode(response{Error: fmt.Sprintf("request refused: %v", err)})
			return
		}
		if err != nil {
			return
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			_ = enc.Encode(response{Error: "bad request: " + err.Error()})
			return
		}
		resp := g.handle(c, req)
		g.mu.Lock()
		greeted := g.conns[c].greeted
		g.mu.Unlock()
		if err := enc.Encode(resp); err != nil || !greeted || req.Op == opBye || req.Op == opOrphaned {
			return
		}
	}
}

// handle answers one request of connection c: a hello first, then the
// requests of a provider at work.
func (g *guard) handle(c net.Conn, req request) response {
	g.mu.Lock()
	greeted := g.conns[c].greeted
	g.mu.Unlock()
	switch {
	case req.Op == opHello && (req.Run == nil || *req.Run != g.run):
		return response{Error: fmt.Sprintf("this is the run guard of %s (%+v), not of the run the provider belongs to (%+v)", g.run, g.run, req.Run)}
	case req.Op == opHello:
		g.mu.Lock()
		g.conns[c].greeted = true
		g.mu.Unlock()
		return response{}
	case !greeted:
		return response{Error: "a connection must name its run (hello) before anything else"}
	}
	g.mu.Lock()
	g.conns[c].working = true
	g.mu.Unlock()
	return g.work(c, req)
}

// work answers a request of a greeted connection c.
func (g *guard) work(c net.Conn, req request) response {
	switch req.Op {
	case opClaim:
		if req.Config == nil {
			return response{Error: "claim needs a client configuration"}
		}
		return g.claim(c, leaseKey(*req.Config, req.Bucket, req.Name))
	case opAdopt:
		if req.Token == nil || req.Config == nil {
			return response{Error: "adopt needs a token and a client configuration"}
		}
		info, err := g.adopt(c, *req.Token, *req.Config)
		if err != nil {
			return response{Error: err.Error()}
		}
		return response{Lease: &info}
	case opAbandon:
		return g.abandon(c, req)
	case opStatus:
		return g.status(req)
	case opBye:
		g.mu.Lock()
		g.conns[c].bye = true
		g.mu.Unlock()
		return response{}
	case opOrphaned:
		g.mu.Lock()
		g.unclean = true
		g.mu.Unlock()
		g.log.Print("a provider process outlived terraform (killed?): the leases will lapse, not be released")
		return response{}
	}
	return response{Error: "unknown request " + strconv.Quote(req.Op)}
}

// abandon drops c's claim of a lease it did not acquire, so that the next
// claim of the lock goes ahead.
func (g *guard) abandon(c net.Conn, req request) response {
	if req.Config == nil {
		return response{Error: "abandon needs a client configuration"}
	}
	key := leaseKey(*req.Config, req.Bucket, req.Name)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns[c].claims[key] {
		delete(g.conns[c].claims, key)
		g.resolveLocked(key)
	}
	return response{}
}

// status reports the run's lease of a token, or that the run holds none.
func (g *guard) status(req request) response {
	if req.Token == nil {
		return response{Error: "status needs a token"}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range g.leases {
		if h.info.Token == *req.Token {
			return response{Lease: h.current()}
		}
	}
	return response{Error: fmt.Sprintf("this run holds no lease of lock %q (epoch %d) in bucket %s", req.Token.Name, req.Token.Epoch, req.Token.Bucket)}
}

// current returns what the guard knows of the lease now.
func (h *held) current() *Lease {
	info := h.info
	if h.lease != nil {
		info.ExpiresAt = h.lease.State().ExpiresAt
	}
	return &info
}

// claim answers with the run's lease of key, or grants c the right to
// acquire it; while another provider process has that right, it waits.
func (g *guard) claim(c net.Conn, key string) response {
	for {
		g.mu.Lock()
		if h, ok := g.leases[key]; ok {
			g.mu.Unlock()
			return response{Lease: h.current()}
		}
		wait, claimed := g.claims[key]
		if !claimed {
			g.claims[key] = make(chan struct{})
			g.conns[c].claims[key] = true
			g.mu.Unlock()
			return response{Granted: true}
		}
		g.mu.Unlock()
		<-wait
	}
}

// resolveLocked ends the granted claim of key. Called with g.mu held.
func (g *guard) resolveLocked(key string) {
	if ch, ok := g.claims[key]; ok {
		close(ch)
		delete(g.claims, key)
	}
}

// adopt takes the lease of token over for the rest of the run: it renews it
// (at once, so that it is trusted for a whole lease again) and releases it
// when the run ends. Only the full token of a lease its sender acquired
// will do: without its nonce, a token names an epoch whoever holds it, and
// the guard would take over another holder's lease while that holder goes
// on renewing it.
func (g *guard) adopt(c net.Conn, token s3lock.Token, cfg ClientConfig) (Lease, error) {
	key := leaseKey(cfg, token.Bucket, token.Name)
	g.mu.Lock()
	granted := g.conns[c].claims[key]
	g.mu.Unlock()
	if !granted {
		return Lease{}, fmt.Errorf("adopting lock %q in bucket %s without a granted claim", token.Name, token.Bucket)
	}
	defer func() {
		g.mu.Lock()
		delete(g.conns[c].claims, key)
		g.resolveLocked(key)
		g.mu.Unlock()
	}()
	if token.Nonce == "" {
		return Lease{}, fmt.Errorf("refusing to adopt lock %q (epoch %d) in bucket %s by its epoch alone: "+
			"adopt takes the full token of the lease its sender acquired, with its nonce", token.Name, token.Epoch, token.Bucket)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adoptTimeout)
	defer cancel()
	lease, err := g.resume(ctx, token, cfg)
	if err != nil {
		return Lease{}, err
	}
	st := lease.State()
	info := Lease{Token: token, Key: st.Key, Holder: st.Holder, AcquiredAt: st.AcquiredAt, ExpiresAt: st.ExpiresAt,
		Duration: st.LeaseDuration, HeldUntilAtMost: st.HeldUntilAtMost}
	g.mu.Lock()
	g.leases[key] = &held{lease: lease, info: info}
	g.record()
	g.mu.Unlock()
	g.log.Printf("holding lock %q in bucket %s (epoch %d) for the run", token.Name, token.Bucket, token.Epoch)
	go g.watch(key, lease)
	return info, nil
}

func (g *guard) resume(ctx context.Context, token s3lock.Token, cfg ClientConfig) (*s3lock.Lease, error) {
	awsCfg, err := awsclient.LoadConfig(ctx, cfg.AWS)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	opts := []s3lock.Option{s3lock.WithHolder(cfg.Holder)}
	if cfg.ExpectedBucketOwner != "" {
		opts = append(opts, s3lock.WithExpectedBucketOwner(cfg.ExpectedBucketOwner))
	}
	objects, err := cfg.Objects.Options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, objects...)
	client, err := s3lock.New(awsclient.S3Client(awsCfg, cfg.AWS), token.Bucket, opts...)
	if err != nil {
		return nil, err
	}
	lease, err := client.Resume(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := lease.Renew(ctx); err != nil {
		lease.Detach()
		return nil, err
	}
	return lease, nil
}

// watch waits for a lease to end; a lease lost during the run interrupts
// terraform. A lease that reached its cap (s3lock.LostMaxHold) is released
// at once, so that the next holder need not wait for it to lapse.
func (g *guard) watch(key string, lease *s3lock.Lease) {
	<-lease.Done()
	err := lease.Err()
	if !errors.Is(err, s3lock.ErrLeaseLost) {
		return
	}
	var reason s3lock.LossReason
	if lost := (*s3lock.LeaseLostError)(nil); errors.As(err, &lost) {
		reason = lost.Reason
	}
	g.mu.Lock()
	if h, ok := g.leases[key]; ok {
		h.info.Lost, h.info.LostReason = err.Error(), reason
	}
	first := !g.interrupted
	g.interrupted = true
	g.mu.Unlock()
	g.log.Printf("lease lost: %v", err)
	if first && g.run.Alive() {
		g.interrupt(lease, err, reason)
	}
	if reason == s3lock.LostMaxHold {
		g.releaseAtCap(lease)
	}
}

// releaseAtCap releases a lease that reached its cap: Release at the cap
// frees the lock at once and returns the cap's error all the same, joined
// with why the release failed if it did (the lease then lapses soon after).
func (g *guard) releaseAtCap(lease *s3lock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	t := lease.Token()
	g.log.Printf("releasing lock %q in bucket %s (epoch %d) at its maximum hold: %v", t.Name, t.Bucket, t.Epoch, lease.Release(ctx))
}

func (g *guard) lost() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.interrupted
}

// interrupt tells terraform that the run's lease was lost, on its standard
// error, and interrupts it as Ctrl-C does, so that it starts no further
// changes.
func (g *guard) interrupt(lease *s3lock.Lease, err error, reason s3lock.LossReason) {
	t := lease.Token()
	msg := fmt.Sprintf("\ns3lock: the lease on lock %q in bucket %s (epoch %d) was lost during this run: %v\n"+
		"s3lock: interrupting terraform (as Ctrl-C does) so that it starts no further changes; "+
		"the changes this run made may not have been exclusive.\n\n", t.Name, t.Bucket, t.Epoch, err)
	if reason == s3lock.LostMaxHold {
		st := lease.State()
		msg = fmt.Sprintf("\ns3lock: the lease on lock %q in bucket %s (epoch %d) reached its max_hold of %s during this "+
			"run (held at most until %s), past which it is not renewed: %v\n"+
			"s3lock: interrupting terraform (as Ctrl-C does) so that it starts no further changes, and releasing the "+
			"lock; raise max_hold if the run needs longer.\n\n", t.Name, t.Bucket, t.Epoch, st.HeldUntilAtMost.Sub(st.AcquiredAt),
			st.HeldUntilAtMost.UTC().Format(time.RFC3339), err)
	}
	if err := tellProcess(g.run.PID, msg); err != nil {
		g.log.Printf("could not tell terraform why (its standard error: %v): %s", err, strings.TrimSpace(msg))
	}
	if err := interruptProcess(g.run.PID); err != nil {
		g.log.Printf("interrupting %s: %v", g.run, err)
	}
}

// end settles the run's leases once terraform is gone: released, unless the
// run did not end cleanly — terraform was killed, or a provider process went
// away without a goodbye or outlived terraform — in which case they are left
// to lapse: what the run started may still be going on. It reports whether
// it left them to lapse.
func (g *guard) end(killed bool) bool {
	deadline := time.Now().Add(orphanWait)
	for {
		g.mu.Lock()
		open, unclean := len(g.conns), g.unclean
		g.mu.Unlock()
		if open == 0 || unclean || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollInterval / 4)
	}
	g.mu.Lock()
	lapse := killed || g.unclean || len(g.conns) > 0
	leases := g.leases
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range leases {
		l := h.lease
		switch {
		case l == nil:
			continue
		case lapse:
			l.Detach()
			g.log.Printf("the run did not end cleanly: leaving lock %q in bucket %s (epoch %d) to lapse after %s",
				l.Token().Name, l.Token().Bucket, l.Token().Epoch, l.State().LeaseDuration)
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			defer cancel()
			switch err := l.Release(ctx); {
			case errors.Is(err, s3lock.ErrLeaseLost):
				g.log.Printf("lock %q in bucket %s (epoch %d) had been lost: %v", l.Token().Name, l.Token().Bucket, l.Token().Epoch, err)
			case err != nil:
				g.log.Printf("releasing lock %q in bucket %s (epoch %d): %v; it lapses after %s", l.Token().Name, l.Token().Bucket, l.Token().Epoch, err, l.State().LeaseDuration)
			default:
				g.log.Printf("the run ended: released lock %q in bucket %s (epoch %d)", l.Token().Name, l.Token().Bucket, l.Token().Epoch)
			}
		})
	}
	wg.Wait()
	return lapse
}

// pruneLogs removes guard logs and stale files older than logKeep.
func pruneLogs(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > logKeep && !e.IsDir() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
