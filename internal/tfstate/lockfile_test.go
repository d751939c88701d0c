package tfstate_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The S3 backend's lock file (Config.LockFile): a store that holds it and
// Terraform's S3 backend with use_lockfile exclude each other on one state.

// plainLockFile is the lock file Terraform's S3 backend writes for a run.
func plainLockFile(id string) []byte {
	return tfstate.LockInfo{ID: id, Operation: "OperationTypeApply", Who: "bob@ci", Version: "1.11.4",
		Created: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), Path: "bucket/app/terraform.tfstate"}.JSON()
}

func putObject(t *testing.T, ns *s3test.Namespace, key string, body []byte) {
	t.Helper()
	if _, err := ns.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// exists says whether an object is at key.
func exists(t *testing.T, ns *s3test.Namespace, key string) bool {
	t.Helper()
	for _, k := range s3test.Keys(t, ns.Client, ns.Bucket, key) {
		if k == key {
			return true
		}
	}
	return false
}

func currentOf(t *testing.T, ns *s3test.Namespace, lock string) s3lock.State {
	t.Helper()
	c, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Current(t.Context(), lock)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestLockFile_HeldWithTheLockAndRemovedByUnlock(t *testing.T) {
	ns := s3test.New(t)
	s := newStore(t, ns, "a", nil, tfstate.Config{LockFile: true, Who: "alice@laptop"})
	id := lock(t, s, "default")
	li, err := tfstate.ParseLockInfo(object(t, ns, s.LockFileKey("default")))
	if err != nil {
		t.Fatal(err)
	}
	if li.ID != id || !strings.HasPrefix(li.Info, "s3lock epoch "+id+":") || li.Who != "alice@laptop" ||
		li.Operation != "OperationTypeApply" {
		t.Errorf("the lock file says %+v; want lock ID %s, s3lock's mark, alice@laptop's apply", li, id)
	}
	if err := s.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	if exists(t, ns, s.LockFileKey("default")) {
		t.Error("the lock file is still there after Unlock")
	}
}

// A lock file a run without s3lock holds makes Lock wait, showing that
// run, and leaves the lock free (no seal, no lease) when the wait ends.
func TestLockFile_APlainRunsLockFileIsWaitedFor(t *testing.T) {
	ns := s3test.New(t)
	var mu sync.Mutex
	var seen []error
	s := newStore(t, ns, "a", nil, tfstate.Config{LockFile: true, Wait: 3 * time.Second,
		WaitObserver: func(held error) { mu.Lock(); seen = append(seen, held); mu.Unlock() }})
	file := s.LockFileKey("default")
	putObject(t, ns, file, plainLockFile("0b4d-uuid"))
	_, err := s.Lock(t.Context(), "default", "OperationTypeApply")
	var held *tfstate.LockFileHeldError
	if !errors.As(err, &held) || held.Info.ID != "0b4d-uuid" || held.Info.Who != "bob@ci" || held.Key != file {
		t.Fatalf("Lock while a plain run holds the lock file: %v; want a *LockFileHeldError naming bob@ci's lock", err)
	}
	mu.Lock()
	if len(seen) == 0 {
		t.Error("the wait observer was never told of the lock file's holder")
	}
	mu.Unlock()
	if st := currentOf(t, ns, s.LockName("default")); st.Phase() == s3lock.PhaseHeld {
		t.Errorf("after the wait the state's lock is %s; want it released", st.Phase())
	}
	if exists(t, ns, s.Key("default")) {
		t.Error("the state was sealed although the lock file was never taken")
	}
	if li, _ := tfstate.ParseLockInfo(object(t, ns, file)); li.ID != "0b4d-uuid" {
		t.Errorf("the plain run's lock file became %+v", li)
	}

	// Once the plain run unlocks, a waiting Lock gets the state.
	go func() {
		time.Sleep(500 * time.Millisecond)
		_, _ = ns.Client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(ns.Bucket), Key: aws.String(file)})
	}()
	id := lock(t, s, "default")
	if li, _ := tfstate.ParseLockInfo(object(t, ns, file)); li.ID != id {
		t.Errorf("after the plain run's unlock the lock file is %+v; want this lock's (ID %s)", li, id)
	}
}

// A lock file left by a run through s3lock that died (its lease is over)
// is removed by the next lock; one of a newer epoch than the lease is not.
func TestLockFile_LeftByARunThatDiedIsCleared(t *testing.T) {
	ns := s3test.New(t)
	gone := make(chan struct{})
	dead := newStore(t, ns, "dead", nil, tfstate.Config{LockFile: true, Lease: s3lock.MinLeaseDuration, Gone: gone})
	deadID := lock(t, dead, "default")
	close(gone) // left to lapse, with its lock file
	next := newStore(t, ns, "next", nil, tfstate.Config{LockFile: true, Wait: time.Minute})
	id := lock(t, next, "default")
	if id == deadID {
		t.Fatalf("the next run got the dead run's lock ID %s", id)
	}
	li, err := tfstate.ParseLockInfo(object(t, ns, next.LockFileKey("default")))
	if err != nil || li.ID != id {
		t.Errorf("the lock file is %+v (%v); want the next run's, lock ID %s", li, err, id)
	}
	if err := next.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
}

// A force-unlock through the store with the lock ID of a plain run's lock
// file removes it, as the S3 backend's force-unlock does; another ID
// removes nothing.
func TestLockFile_ForceUnlockOfAPlainRunsLockID(t *testing.T) {
	ns := s3test.New(t)
	s := newStore(t, ns, "a", nil, tfstate.Config{LockFile: true})
	file := s.LockFileKey("default")
	putObject(t, ns, file, plainLockFile("0b4d-uuid"))
	if err := s.Unlock(t.Context(), "default", "other-uuid"); err == nil || !strings.Contains(err.Error(), "bob@ci") {
		t.Errorf("force-unlock of an ID nobody holds: %v; want it refused, naming the lock file's holder", err)
	}
	if !exists(t, ns, file) {
		t.Fatal("a refused force-unlock removed the lock file")
	}
	if err := s.Unlock(t.Context(), "default", "0b4d-uuid"); err != nil {
		t.Fatalf("force-unlock of the plain run's lock ID: %v", err)
	}
	if exists(t, ns, file) {
		t.Error("the plain run's lock file is still there after its force-unlock")
	}
}

// A force-unlock of the current lease's ID releases the lease and removes
// its lock file.
func TestLockFile_ForceUnlockOfTheLeaseRemovesItsLockFile(t *testing.T) {
	ns := s3test.New(t)
	var lost []error
	var mu sync.Mutex
	a := newStore(t, ns, "a", nil, tfstate.Config{LockFile: true, Lease: s3lock.MinLeaseDuration,
		OnLost: func(_ string, err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() }})
	operator := newStore(t, ns, "operator", nil, tfstate.Config{LockFile: true})
	id := lock(t, a, "default")
	if err := operator.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	if exists(t, ns, a.LockFileKey("default")) {
		t.Error("the force-released lease's lock file is still there")
	}
	// The holder finds out at its next renewal (a third of the lease) and
	// is told through OnLost; its writes are refused.
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := len(lost)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("OnLost was not called for a force-released lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var swe *tfstate.StaleWriteError
	if err := a.WriteUnder(t.Context(), "default", id, stateJSON("1")); !errors.As(err, &swe) {
		t.Errorf("a write of the force-released lease: %v; want a *StaleWriteError", err)
	}
}

// WriteUnder never writes without the lock it names.
func TestStore_WriteUnderRefusesALockItDoesNotHold(t *testing.T) {
	ns := s3test.New(t)
	s := newStore(t, ns, "a", nil, tfstate.Config{})
	id := lock(t, s, "default")
	if err := s.WriteUnder(t.Context(), "default", id, stateJSON("1")); err != nil {
		t.Fatalf("a write under the held lock: %v", err)
	}
	if err := s.WriteUnder(t.Context(), "default", id+"1", stateJSON("2")); !errors.Is(err, tfstate.ErrNotHeld) {
		t.Errorf("a write under another lock ID: %v; want ErrNotHeld", err)
	}
	if err := s.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	var swe *tfstate.StaleWriteError
	if err := s.WriteUnder(t.Context(), "default", id, stateJSON("3")); !errors.As(err, &swe) || !errors.Is(err, tfstate.ErrNotHeld) {
		t.Errorf("a write under a lock unlocked since: %v; want a *StaleWriteError matching ErrNotHeld", err)
	}
	if got, _ := s.Read(t.Context(), "default"); !bytes.Equal(got, stateJSON("1")) {
		t.Errorf("the state is %q; want the write made under the lock", got)
	}
}

// A write without the lock is refused while anyone holds it: a lease, or
// the lock file of a run without s3lock; it is written when the lock is
// free, or only a dead run's lock file is left.
func TestStore_WriteUnlockedIsRefusedWhileTheStateIsLocked(t *testing.T) {
	ns := s3test.New(t)
	holder := newStore(t, ns, "holder", nil, tfstate.Config{LockFile: true, Who: "alice@laptop"})
	u := newStore(t, ns, "u", nil, tfstate.Config{LockFile: true})
	id := lock(t, holder, "default")
	var locked *tfstate.LockedError
	if err := u.WriteUnlocked(t.Context(), "default", stateJSON(`"u"`)); !errors.As(err, &locked) || locked.Holder.ID != id {
		t.Fatalf("a write without the lock while it is held: %v; want a *LockedError naming lock ID %s", err, id)
	}
	if err := holder.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	putObject(t, ns, u.LockFileKey("default"), plainLockFile("0b4d-uuid"))
	if err := u.WriteUnlocked(t.Context(), "default", stateJSON(`"u"`)); !errors.As(err, &locked) || locked.Holder.ID != "0b4d-uuid" {
		t.Fatalf("a write without the lock while a plain run holds the lock file: %v; want a *LockedError naming it", err)
	}
	if _, err := ns.Client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(ns.Bucket),
		Key: aws.String(u.LockFileKey("default"))}); err != nil {
		t.Fatal(err)
	}
	if err := u.WriteUnlocked(t.Context(), "default", stateJSON(`"u"`)); err != nil {
		t.Fatalf("a write without the lock while it is free: %v", err)
	}
	if got := object(t, ns, u.Key("default")); !bytes.Equal(got, stateJSON(`"u"`)) {
		t.Errorf("the state object is %q; want the write, unmarked", got)
	}
}

func TestStore_RefusesKeysWithDotSegments(t *testing.T) {
	for _, key := range []string{"..", "a/../b", "./a", "a/.", "a/./b"} {
		if err := tfstate.ValidateKey(key); !errors.Is(err, tfstate.ErrInvalidConfig) {
			t.Errorf("ValidateKey(%q) = %v; want ErrInvalidConfig", key, err)
		}
	}
	for _, key := range []string{"a..b/terraform.tfstate", ".hidden/terraform.tfstate", "env:/dev/app/terraform.tfstate"} {
		if err := tfstate.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v; want it accepted", key, err)
		}
	}
}

func TestLockInfo_TextFromOutsideIsMadeSafeToPrint(t *testing.T) {
	li, err := tfstate.ParseLockInfo([]byte(`{"ID":"x\u001b[2J","Who":"eve\r\nFAKE: done","Info":"` + strings.Repeat("é", 300) + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(li.ID+li.Who+li.Info, "\x1b\r\n") {
		t.Errorf("control characters survived: %q %q", li.ID, li.Who)
	}
	if len(li.Info) > 260 || !strings.HasSuffix(li.Info, "…") {
		t.Errorf("a long Info was not cut: %d bytes", len(li.Info))
	}
	if _, err := tfstate.ParseLockInfo(bytes.Repeat([]byte("x"), 70<<10)); err == nil {
		t.Error("a lock info of 70 KiB was read")
	}
}

// A lock under which no state was written (a plan of a new state) leaves
// no placeholder behind: Terraform's S3 backend could not read it. A lock
// under which a state was written keeps it.
func TestStore_AnUnlockRemovesAPlaceholderNothingWasWrittenOver(t *testing.T) {
	ns := s3test.New(t)
	s := newStore(t, ns, "a", nil, tfstate.Config{})
	id := lock(t, s, "default")
	if !exists(t, ns, s.Key("default")) {
		t.Fatal("the lock's seal left no placeholder")
	}
	if err := s.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	if exists(t, ns, s.Key("default")) {
		t.Errorf("after an unlock with nothing written, the state object is %q; want none", object(t, ns, s.Key("default")))
	}
	id = lock(t, s, "default")
	if err := s.Write(t.Context(), "default", stateJSON("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	id = lock(t, s, "default") // sealed over a state: no placeholder
	if err := s.Unlock(t.Context(), "default", id); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Read(t.Context(), "default"); !bytes.Equal(got, stateJSON("1")) {
		t.Errorf("the state is %q; want the one written kept", got)
	}
}

// A lease lost while held (here: force-released by an operator) takes its
// lock file with it, so that runs of the S3 backend are not kept waiting.
func TestLockFile_ALostLeasesLockFileIsRemoved(t *testing.T) {
	ns := s3test.New(t)
	lost := make(chan struct{})
	a := newStore(t, ns, "a", nil, tfstate.Config{LockFile: true, Lease: s3lock.MinLeaseDuration,
		OnLost: func(string, error) { close(lost) }})
	lock(t, a, "default")
	st := currentOf(t, ns, a.LockName("default"))
	c, err := s3lock.New(ns.Client, ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ForceRelease(t.Context(), s3lock.Token{Bucket: ns.Bucket, Name: st.Name, Epoch: st.Epoch}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(time.Minute):
		t.Fatal("OnLost was not called")
	}
	// OnLost comes first (the cleanup may wait on a store that is gone).
	testkit.Eventually(t, 30*time.Second, "the lost lease's lock file to be removed", func() bool {
		return !exists(t, ns, a.LockFileKey("default"))
	})
}

// An unlock never deletes a state a write under the lock may have landed:
// it waits for the writes in flight, and a write that sent its PUT ends
// the placeholder's claim (the reviewer's case: on a store that ignores
// If-Match on DELETE, MinIO, the state written was deleted).
func TestStore_AnUnlockWaitsForTheWriteInFlightAndKeepsItsState(t *testing.T) {
	ns := s3test.New(t)
	gate := &putGate{}
	var mu sync.Mutex
	deletes := 0
	wrap := func(next http.RoundTripper) http.RoundTripper {
		held := gate.wrap(next)
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodDelete && strings.HasSuffix(req.URL.Path, "terraform.tfstate") {
				mu.Lock()
				deletes++
				mu.Unlock()
				req.Header.Del("If-Match") // as MinIO: the condition ignored
			}
			return held.RoundTrip(req)
		})
	}
	s := newStore(t, ns, "a", ns.NewClient(t, s3test.WithTransport(wrap)), tfstate.Config{})
	id := lock(t, s, "default") // seals a placeholder
	gate.hold()
	wrote := make(chan error, 1)
	go func() { wrote <- s.Write(context.Background(), "default", stateJSON("1")) }()
	gate.waitHeld(t)
	unlocked := make(chan error, 1)
	go func() { unlocked <- s.Unlock(context.Background(), "default", id) }()
	select {
	case err := <-unlocked:
		t.Fatalf("Unlock returned (%v) while a write under the lock was in flight", err)
	case <-time.After(300 * time.Millisecond): // it waits: nothing to see but its absence
	}
	gate.release()
	if err := <-wrote; err != nil {
		t.Fatalf("the write in flight: %v", err)
	}
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if deletes != 0 {
		t.Errorf("the unlock sent %d DELETE(s) of the state after a write", deletes)
	}
	if got, _ := s.Read(t.Context(), "default"); !bytes.Equal(got, stateJSON("1")) {
		t.Errorf("after the unlock the state is %q; want the write's", got)
	}
}

// A force-unlock of a lease that lapsed (its run died) removes the lock
// file that lease left.
func TestLockFile_ForceUnlockOfALapsedLeaseRemovesItsLockFile(t *testing.T) {
	ns := s3test.New(t)
	gone := make(chan struct{})
	dead := newStore(t, ns, "dead", nil, tfstate.Config{LockFile: true, Lease: s3lock.MinLeaseDuration, Gone: gone})
	id := lock(t, dead, "default")
	close(gone)
	testkit.Eventually(t, 30*time.Second, "the lease to lapse", func() bool {
		return currentOf(t, ns, dead.LockName("default")).Phase() == s3lock.PhaseLapsed
	})
	operator := newStore(t, ns, "operator", nil, tfstate.Config{LockFile: true})
	if err := operator.Unlock(t.Context(), "default", id); err != nil {
		t.Fatalf("force-unlock of the lapsed lease %s: %v", id, err)
	}
	if exists(t, ns, dead.LockFileKey("default")) {
		t.Error("the lapsed lease's lock file is still there after its force-unlock")
	}
}

// TestStore_RefusesKeysAmongALocksObjects: `backend run --key
// coll/lock-0000000002.json` was accepted; its state was then read as epoch 2
// of the lock "coll", and force-releasing that epoch replaced the state with
// a lease (issue 35, found by a new user). A key is held to a lock name's
// rules, so that it never sits among a lock's objects.
func TestStore_RefusesKeysAmongALocksObjects(t *testing.T) {
	for _, key := range []string{"coll/lock-0000000002.json", "lock-1.json", "x/lock-line", "x/lock-slots/y", "x/s3lock-probe", "::error::x/terraform.tfstate"} {
		if err := tfstate.ValidateKey(key); !errors.Is(err, tfstate.ErrInvalidConfig) {
			t.Errorf("ValidateKey(%q) = %v; want ErrInvalidConfig", key, err)
		}
	}
}

// TestTerraformLockInfo_OnlyAStatesLease: a lease's own metadata "who" is
// not Terraform's lock info; only a state's lease (named KEY.s3lock, naming
// its state) carries it (a new user saw their resource's metadata shown as
// Terraform's, issue 36).
func TestTerraformLockInfo_OnlyAStatesLease(t *testing.T) {
	meta := map[string]string{tfstate.MetaWho: "alice@ci", tfstate.MetaOperation: "OperationTypeApply", tfstate.MetaState: "s3://b/app/terraform.tfstate"}
	state := &s3lock.HeldError{Name: "app/terraform.tfstate" + tfstate.LockSuffix, Metadata: meta}
	if tfstate.TerraformWho(state) != "alice@ci" || tfstate.TerraformOperation(state) != "OperationTypeApply" {
		t.Errorf("a state's lease: who %q, operation %q", tfstate.TerraformWho(state), tfstate.TerraformOperation(state))
	}
	for _, held := range []*s3lock.HeldError{
		{Name: "deploy/prod", Metadata: meta},
		{Name: "app/terraform.tfstate" + tfstate.LockSuffix, Metadata: map[string]string{tfstate.MetaWho: "res"}},
	} {
		if w, op := tfstate.TerraformWho(held), tfstate.TerraformOperation(held); w != "" || op != "" {
			t.Errorf("lease %q with metadata %v: who %q, operation %q; want none", held.Name, held.Metadata, w, op)
		}
	}
}
