package tfhttp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
)

// A grant is a lock the server took for a Terraform process: the store that
// holds it, the lock ID Terraform chose (which its writes carry) and the
// lock ID s3lock shows (the lease's epoch). An ended grant stays until its
// client's UNLOCK, so that the client's late writes and unlock are refused
// with the reason rather than taken for requests without a lock.
type grant struct {
	key    string
	id     string // Terraform's
	lockID string // the epoch
	info   tfstate.LockInfo
	shared bool // a plan's shared lock (tfstate.SharedOperation): other plans' grants hold the state too
	store  *tfstate.Store
	since  time.Time
	hold   *time.Timer // MaxHold; nil without

	ended   error     // why it ended, under Server.mu; nil while held
	endedAt time.Time // when, under Server.mu
	lost    bool      // it ended by its lease's loss (its lock file may be left), under Server.mu
}

// unlock releases the grant's lock, within releaseTimeout: a store that
// does not answer leaves it to lapse.
func (g *grant) unlock() error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return g.store.Unlock(ctx, tfstate.DefaultWorkspace, g.lockID)
}

// Reasons the server releases a grant before its client's UNLOCK.
var (
	errServerStopped = errors.New("s3lock backend stopped")
	errHeldTooLong   = errors.New("it was held longer than the server's --max-hold")
	errForceUnlocked = errors.New("it was force-unlocked")
)

// end marks the grant ended, released for why, if it was held; it reports
// whether it was (the caller then releases it). The caller holds Server.mu.
func (g *grant) end(why error) bool {
	if g.ended != nil {
		return false
	}
	g.ended, g.endedAt = fmt.Errorf("its lock was released: %w", why), time.Now()
	if g.hold != nil {
		g.hold.Stop()
	}
	return true
}

// grantByID is the grant of Terraform's lock ID, or nil.
func (s *Server) grantByID(id string) *grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants[id]
}

// heldGrant is a grant that holds the state at key now, or nil: the
// exclusive one if there is one, else one of the plans' shared ones.
func (s *Server) heldGrant(key string) *grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	var shared *grant
	for _, g := range s.grants {
		switch {
		case g.key != key || g.ended != nil:
		case !g.shared:
			return g
		default:
			shared = g
		}
	}
	return shared
}

// grantOfLockID is the held grant of the state at key whose s3lock lock ID
// is lockID, or nil.
func (s *Server) grantOfLockID(key, lockID string) *grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.grants {
		if g.key == key && g.lockID == lockID && g.ended == nil {
			return g
		}
	}
	return nil
}

// record keeps a new grant; false if the server is stopping (the caller
// then releases the lock).
func (s *Server) record(g *grant) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	for id, old := range s.grants { // ended grants whose clients never came back
		if old.ended != nil && time.Since(old.endedAt) > endedGrantLife {
			delete(s.grants, id)
		}
	}
	s.grants[g.id] = g
	if s.cfg.MaxHold > 0 {
		g.hold = time.AfterFunc(s.cfg.MaxHold, func() { _ = s.release(g, errHeldTooLong) }) // release reports its failure
	}
	return true
}

// forget drops a grant (its client unlocked it).
func (s *Server) forget(g *grant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.end(errors.New("its run unlocked it"))
	if s.grants[g.id] == g {
		delete(s.grants, g.id)
	}
}

// release ends a held grant for why and releases its lock; it returns the
// release's error (nil if the grant had ended already).
func (s *Server) release(g *grant, why error) error {
	s.mu.Lock()
	live := g.end(why)
	s.mu.Unlock()
	if !live {
		return nil
	}
	err := g.unlock()
	if err != nil {
		s.cfg.Log(fmt.Sprintf("could not release the state lock of s3://%s/%s (lock ID %s, %s; %v), which lapses by itself: %v",
			s.cfg.State.Bucket, g.key, g.lockID, whoText(g.info), why, err))
		return err
	}
	s.cfg.Log(fmt.Sprintf("released the state lock of s3://%s/%s (lock ID %s, %s): %v; its writes are refused from now on",
		s.cfg.State.Bucket, g.key, g.lockID, whoText(g.info), why))
	return nil
}

// lost is the OnLost of a grant's store: its lease ended by itself.
func (s *Server) lost(g *grant, err error) {
	s.mu.Lock()
	live, onLost, lockID := g.ended == nil, s.onLost, g.lockID
	if live {
		g.ended, g.endedAt, g.lost = fmt.Errorf("its lease was lost: %w", err), time.Now(), true
		if g.hold != nil {
			g.hold.Stop()
		}
	}
	s.mu.Unlock()
	if !live {
		return
	}
	s.cfg.Log(fmt.Sprintf("the state lock of s3://%s/%s (lock ID %s, %s) was lost: %v; its writes are refused from now on",
		s.cfg.State.Bucket, g.key, lockID, whoText(g.info), err))
	if onLost != nil {
		onLost(g.key, err)
	}
}

// releaseTimeout bounds a release of a grant (its client's unlock, max
// hold, force-unlock, shutdown): a store that does not answer leaves the
// lock to lapse, rather than hold up the command's exit.
const releaseTimeout = 30 * time.Second

// endedGrantLife is how long an ended grant is kept for its client's late
// writes and unlock (refused with the reason) before it is forgotten: a
// client of serve that vanished never sends them.
const endedGrantLife = time.Hour

// whoText says whose a lock is, from its lock info.
func whoText(li tfstate.LockInfo) string {
	who := li.Who
	if who == "" {
		who = "an unknown holder"
	}
	if li.Operation != "" {
		return who + ", " + li.Operation
	}
	return who
}
