package tfhttp

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// maxStateBody bounds a state Terraform writes: the store's bound.
const maxStateBody = tfstate.MaxStateSize

// ws is the workspace of every store the server makes: its key is the
// state object's own (a non-default workspace's key is in the URL).
const ws = tfstate.DefaultWorkspace

// get returns the state: 200 with it, or 404 when there is none (no object,
// or only a lock's placeholder).
func (s *Server) get(w http.ResponseWriter, r *http.Request, key string) {
	st, err := s.readerOf(key)
	if err != nil {
		s.failed(w, "reading", key, err)
		return
	}
	body, err := st.Read(r.Context(), ws)
	if err != nil {
		s.failed(w, "reading", key, err)
		return
	}
	if body == nil {
		reply(w, http.StatusNotFound, fmt.Sprintf("s3lock backend: no state at s3://%s/%s yet", s.cfg.State.Bucket, key))
		return
	}
	sum := md5.Sum(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	_, _ = w.Write(body)
}

// readerOf is the store a read of key goes through: the lock holder's while
// this server holds the state's lock (a read of its own bytes confirms what
// its next write must find), else a store of its own.
func (s *Server) readerOf(key string) (*tfstate.Store, error) {
	if g := s.heldGrant(key); g != nil {
		return g.store, nil
	}
	return s.store(key, s.cfg.State)
}

// put writes the state. With ?ID= (Terraform holds the lock) the write is
// fenced under that lock's lease; a lock that is not held, a lease that
// ended or was overtaken, or a plan's shared lock (which never writes) is
// refused with 409 and nothing is written.
// Without it (-lock=false) the state is written as the S3 backend would,
// unless its lock is held by anyone (423).
func (s *Server) put(w http.ResponseWriter, r *http.Request, key string) {
	body, ok := s.readState(w, r, key)
	if !ok {
		return
	}
	id := r.URL.Query().Get("ID")
	if id == "" {
		s.putUnlocked(w, r, key, body)
		return
	}
	g := s.grantByID(id)
	s.mu.Lock()
	var ended error
	if g != nil {
		ended = g.ended
	}
	s.mu.Unlock()
	switch {
	case g == nil || g.key != key:
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused a write of the state s3://%s/%s under lock ID %q: "+
			"this server holds no such lock of that state (did s3lock backend restart?)", s.cfg.State.Bucket, key, tfstate.Printable(id)))
		return
	case ended != nil:
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused a write of the state s3://%s/%s under lock ID %s: %v; %s",
			s.cfg.State.Bucket, key, g.lockID, ended, erroredHint))
		return
	}
	err := g.store.WriteUnder(r.Context(), ws, g.lockID, body)
	var stale *tfstate.StaleWriteError
	switch {
	case errors.Is(err, tfstate.ErrSharedLock):
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused a write under lock ID %s: %v", g.lockID, err))
	case errors.As(err, &stale):
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused a write under lock ID %s: %v; %s", g.lockID, err, erroredHint))
	case err != nil:
		s.failed(w, "writing", key, err)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// erroredHint says what Terraform does with a state it could not write.
const erroredHint = "Terraform keeps the state it could not write in errored.tfstate; see `terraform state push` once you have " +
	"checked that it should replace the state a newer run wrote"

// putUnlocked writes a state without the lock.
func (s *Server) putUnlocked(w http.ResponseWriter, r *http.Request, key string, body []byte) {
	st, err := s.store(key, s.cfg.State)
	if err != nil {
		s.failed(w, "writing", key, err)
		return
	}
	err = st.WriteUnlocked(r.Context(), ws, body)
	var locked *tfstate.LockedError
	switch {
	case errors.As(err, &locked):
		s.refuse(w, http.StatusLocked, "refused a write without the lock (-lock=false): "+err.Error())
	case err != nil:
		s.failed(w, "writing", key, err)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// readState reads a state from a request: bounded, and checked against its
// Content-MD5 (Terraform sends one).
func (s *Server) readState(w http.ResponseWriter, r *http.Request, key string) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxStateBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("refused a state of more than %d MiB for s3://%s/%s",
			maxStateBody>>20, s.cfg.State.Bucket, key))
		return nil, false
	case err != nil:
		reply(w, http.StatusBadRequest, "s3lock backend: reading the request: "+err.Error())
		return nil, false
	}
	if want := r.Header.Get("Content-MD5"); want != "" {
		sum := md5.Sum(body)
		if got := base64.StdEncoding.EncodeToString(sum[:]); got != want {
			s.refuse(w, http.StatusBadRequest, fmt.Sprintf("refused a write of s3://%s/%s: its body does not match its Content-MD5 "+
				"(%d bytes arrived; damaged in transit?)", s.cfg.State.Bucket, key, len(body)))
			return nil, false
		}
	}
	return body, true
}

// lock takes the state's lock for a Terraform process — shared for a plan,
// exclusive for anything else, by the lock info's Operation
// (tfstate.Store.Lock): waits in the lock's line up to the configured wait,
// then 200; 423 with the holder's lock info when the wait ends
// (Terraform's -lock-timeout then tries again).
func (s *Server) lock(w http.ResponseWriter, r *http.Request, key string) {
	info, ok := s.lockInfo(w, r, true)
	if !ok {
		return
	}
	if g := s.grantByID(info.ID); g != nil {
		s.relock(w, g, key, info)
		return
	}
	g := &grant{key: key, id: info.ID, info: info, shared: tfstate.SharedOperation(info.Operation)}
	cfg := s.cfg.State
	cfg.Who = info.Who
	cfg.OnLost = func(_ string, err error) { s.lost(g, err) }
	stop := func() {}
	if s.cfg.Progress != nil {
		cfg.WaitObserver, stop = s.cfg.Progress(key+tfstate.LockSuffix, cfg.Wait)
	}
	st, err := s.store(key, cfg)
	if err != nil {
		stop()
		s.failed(w, "locking", key, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.waits.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	started := time.Now()
	lockID, err := st.Lock(ctx, ws, info.Operation)
	stop()
	if err != nil {
		s.lockFailed(w, r, key, err, time.Since(started))
		return
	}
	s.mu.Lock()
	g.store, g.lockID, g.since = st, lockID, time.Now()
	s.mu.Unlock()
	if r.Context().Err() != nil || !s.record(g) {
		// The client gave up (it went away) or the server is stopping:
		// nobody will unlock this lock.
		_ = g.unlock()
		reply(w, http.StatusServiceUnavailable, "s3lock backend: the backend is stopping; the lock was released")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(info.JSON())
}

// relock answers a LOCK with a lock ID this server granted already: the
// retry of a LOCK whose answer was lost is granted again; anything else is
// refused.
func (s *Server) relock(w http.ResponseWriter, g *grant, key string, info tfstate.LockInfo) {
	s.mu.Lock()
	ended := g.ended
	s.mu.Unlock()
	switch {
	case g.key == key && ended == nil:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(info.JSON())
	case g.key == key:
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused a lock of s3://%s/%s under lock ID %q: that lock was taken already, and %v",
			s.cfg.State.Bucket, key, info.ID, ended))
	default:
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused a lock of s3://%s/%s under lock ID %q: that ID names a lock of another state, s3://%s/%s",
			s.cfg.State.Bucket, key, info.ID, s.cfg.State.Bucket, g.key))
	}
}

// lockFailed answers a LOCK that did not get the lock.
func (s *Server) lockFailed(w http.ResponseWriter, r *http.Request, key string, err error, waited time.Duration) {
	var held *s3lock.HeldError
	var file *tfstate.LockFileHeldError
	var holder tfstate.LockInfo
	switch {
	case r.Context().Err() != nil:
		return // the client went away while it waited: nobody to answer
	case errors.As(err, &held):
		holder = tfstate.HolderInfo(held, key)
	case errors.As(err, &file):
		holder = file.Info
	case s.waits.Err() != nil:
		holder = tfstate.LockInfo{Info: "s3lock backend: the wait was interrupted", Path: key}
	default:
		s.failed(w, "locking", key, err)
		return
	}
	switch {
	case s.waits.Err() != nil:
		s.cfg.Log(fmt.Sprintf("stopped waiting for the state lock of s3://%s/%s: interrupted", s.cfg.State.Bucket, key))
	case s.cfg.State.Wait == 0:
		s.cfg.Log(fmt.Sprintf("the state s3://%s/%s is locked: %s; Terraform (or OpenTofu) reports it as \"already locked: ID=%s\"%s",
			s.cfg.State.Bucket, key, lockedText(holder, file != nil), holder.ID, s.forceHint(key, holder.ID)))
	default:
		s.cfg.Log(fmt.Sprintf("gave up on the state lock of s3://%s/%s after waiting %s (--wait): %s; Terraform (or OpenTofu) reports it as \"already locked: ID=%s\"%s",
			s.cfg.State.Bucket, key, waited.Round(time.Second), lockedText(holder, file != nil), holder.ID, s.forceHint(key, holder.ID)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusLocked)
	_, _ = w.Write(holder.JSON())
}

// lockedText says who holds a state's lock.
func lockedText(holder tfstate.LockInfo, lockFile bool) string {
	if lockFile {
		return "a run without s3lock holds the s3 backend's lock file (" + holder.Holder() + ")"
	}
	if holder.ID == "" { // free, but others are in line first
		return holder.Info
	}
	return "held by " + holder.Holder() + "; " + holder.Info
}

// forceHint says how to free a lock whose run is gone.
func (s *Server) forceHint(key, id string) string {
	switch {
	case id == "":
		return ""
	case s.cfg.Key == "": // serve: Terraform sends no ID with a force-unlock
		return fmt.Sprintf(" (if its run is gone: terraform force-unlock %s, with ?ID=%s added to TF_HTTP_UNLOCK_ADDRESS)", id, id)
	}
	return fmt.Sprintf(" (if its run is gone: s3lock backend run --key %s -- terraform force-unlock %s)", key, id)
}

// unlock releases the lock of the ID the request names: Terraform's own
// (its lock), or, as a force-unlock, the s3lock lock ID (the lease's
// epoch) or that of the S3 backend's lock file of a run without s3lock.
// Terraform's and OpenTofu's force-unlock send no ID: it comes from the
// URL's ?ID= or the server's ForceUnlockID.
func (s *Server) unlock(w http.ResponseWriter, r *http.Request, key string) {
	info, ok := s.lockInfo(w, r, false)
	if !ok {
		return
	}
	id := info.ID
	if id == "" {
		id = r.URL.Query().Get("ID")
	}
	if id == "" {
		id = s.cfg.ForceUnlockID
	}
	if id == "" {
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused an unlock of s3://%s/%s that names no lock ID: Terraform's "+
			"force-unlock over the http backend sends none; add ?ID=ID to TF_HTTP_UNLOCK_ADDRESS, run it through "+
			"`s3lock backend run --key %s -- terraform force-unlock ID`, or use `s3lock force-release %s%s --epoch ID`",
			s.cfg.State.Bucket, key, key, key, tfstate.LockSuffix))
		return
	}
	if g := s.grantByID(id); g != nil && g.key == key {
		s.unlockGrant(w, g)
		return
	}
	if g := s.grantOfLockID(key, id); g != nil {
		if err := s.release(g, errForceUnlocked); err != nil {
			s.failed(w, "unlocking", key, err)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	st, err := s.store(key, s.cfg.State)
	if err == nil {
		err = st.Unlock(r.Context(), ws, id)
	}
	var nc *tfstate.NotCurrentError
	var se *tfstate.SharedEpochError
	switch {
	case errors.As(err, &nc), errors.As(err, &se):
		s.refuse(w, http.StatusConflict, "refused a force-unlock: "+err.Error())
	case err != nil:
		s.refuse(w, http.StatusConflict, fmt.Sprintf("refused an unlock of s3://%s/%s: %v", s.cfg.State.Bucket, key, err))
	default:
		s.cfg.Log(fmt.Sprintf("force-unlocked the state s3://%s/%s (lock ID %s)", s.cfg.State.Bucket, key, tfstate.Printable(id)))
		w.WriteHeader(http.StatusOK)
	}
}

// unlockGrant is a client's UNLOCK of its own lock.
func (s *Server) unlockGrant(w http.ResponseWriter, g *grant) {
	s.mu.Lock()
	ended := g.ended
	s.mu.Unlock()
	if ended != nil {
		s.forget(g)
		s.refuse(w, http.StatusConflict, fmt.Sprintf("the state lock of s3://%s/%s (lock ID %s) was not held any more when its run unlocked it: %v",
			s.cfg.State.Bucket, g.key, g.lockID, ended))
		return
	}
	err := g.unlock()
	s.forget(g)
	if err != nil {
		s.refuse(w, http.StatusConflict, fmt.Sprintf("unlocking the state s3://%s/%s (lock ID %s): %v", s.cfg.State.Bucket, g.key, g.lockID, err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// lockInfo reads the lock info of a LOCK (required, with an ID) or an
// UNLOCK (may be empty).
func (s *Server) lockInfo(w http.ResponseWriter, r *http.Request, required bool) (tfstate.LockInfo, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, tfstate.MaxLockInfo))
	if err != nil {
		reply(w, http.StatusBadRequest, "s3lock backend: reading the lock info: "+err.Error())
		return tfstate.LockInfo{}, false
	}
	if len(body) == 0 && !required {
		return tfstate.LockInfo{}, true
	}
	info, err := tfstate.ParseLockInfo(body)
	if err == nil && required && info.ID == "" {
		err = errors.New("the lock info has no ID")
	}
	if err != nil {
		reply(w, http.StatusBadRequest, "s3lock backend: "+err.Error())
		return tfstate.LockInfo{}, false
	}
	return info, true
}

// refuse answers a request that was refused, and tells the user why (Terraform
// shows only the status).
func (s *Server) refuse(w http.ResponseWriter, status int, msg string) {
	s.cfg.Log(msg)
	reply(w, status, "s3lock backend: "+msg)
}

// failed answers a request the store failed: 502, which Terraform's http
// backend retries (twice, by default) before it reports the status.
func (s *Server) failed(w http.ResponseWriter, doing, key string, err error) {
	msg := fmt.Sprintf("%s the state s3://%s/%s failed: %v", doing, s.cfg.State.Bucket, key, err)
	s.cfg.Log(msg)
	reply(w, http.StatusBadGateway, "s3lock backend: "+msg)
}
