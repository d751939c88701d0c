package provider

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// TestLockWaited: the warning of a lease had after a wait names whom it
// waited for in every shape a wait takes, with its place in line and how
// long; only a whole run's lease explains Terraform's "Closing...".
func TestLockWaited(t *testing.T) {
	since := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	alice := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "alice@build-7", Epoch: 3, AcquiredAt: since}
	behind := *alice
	behind.Ahead = 2
	bob := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "bob", Epoch: 4, AcquiredAt: since}
	// A user's metadata "who" is not Terraform's lock info (a new user saw
	// `Terraform's lock info: who "res"` for the resource's own metadata).
	tagged := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "res-pipeline", Epoch: 1, AcquiredAt: since,
		Metadata: map[string]string{"who": "res"}}
	queued := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Queued: true, Ahead: 1}
	slots := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "carol", Epoch: 7, Key: "deploy/prod/lock-slots/2/lock-0000000007.json", AcquiredAt: since}
	readers := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "plan-41", Key: "deploy/prod/lock-shared/0000000003/0123456789abcdef.json",
		Epoch: 3, AcquiredAt: since, Shared: true, Waiting: 2}
	writer := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "apply-40", Epoch: 4, AcquiredAt: since, Pending: true}
	file := &tfstate.LockFileHeldError{Bucket: "b", Key: "k.tflock", Info: tfstate.LockInfo{ID: "0b4d", Who: "dave@ci", Operation: "OperationTypeApply"}}
	got := leaseRef{bucket: "b", name: "deploy/prod", epoch: 5}
	cases := []struct {
		name     string
		got      leaseRef
		w        lockWait
		wholeRun bool
		want     []string
		wantNot  []string
	}{
		{name: "held", got: got, w: lockWait{first: alice, last: alice, took: 12*time.Second + 400*time.Millisecond},
			want: []string{`Lock "deploy/prod" in bucket "b": this run waited 12s for it.`,
				`When it asked, it was held by "alice@build-7" (epoch 3, since 2026-12-07T12:00:00Z).`,
				`It holds the lock now, at epoch 5 (s3://b/deploy/prod/lock-0000000005.json).`},
			wantNot: []string{"Then", "Closing", "ahead"}},
		{name: "in line, for the whole run", got: got, wholeRun: true, w: lockWait{first: &behind, last: alice, took: 2 * time.Minute},
			want: []string{"waited 2m for it", `held by "alice@build-7" (epoch 3, since 2026-12-07T12:00:00Z), and 2 other runs were ahead of this one in line.`,
				`the "Closing..." that Terraform shows for it when the plan ends only ends the plan's use of it`},
			wantNot: []string{"Then"}},
		{name: "a lease's own metadata", got: got, w: lockWait{first: tagged, last: tagged, took: time.Second},
			want: []string{`held by "res-pipeline" (epoch 1, since 2026-12-07T12:00:00Z).`}, wantNot: []string{"lock info"}},
		{name: "another holder in between", got: got, w: lockWait{first: alice, last: bob, took: 300 * time.Millisecond},
			want: []string{"waited less than a second for it", `held by "alice@build-7"`, `Then it was held by "bob" (epoch 4,`}},
		{name: "free, others queued first", got: got, w: lockWait{first: queued, last: queued, took: time.Second},
			want: []string{"When it asked, the lock was free, but 1 other run was queued for it first."}},
		{name: "slots", got: leaseRef{bucket: "b", name: "deploy/prod", epoch: 9, slot: 1}, w: lockWait{first: slots, last: slots, took: time.Second},
			want: []string{`all of its slots were held, the one to run out first, slot 2, by "carol" (epoch 7,`,
				"It holds the lock now, in slot 1 at epoch 9"}},
		{name: "shared holders", got: got, w: lockWait{first: readers, last: readers, took: time.Second},
			want: []string{`When it asked, it was held by 2 shared holders, e.g. "plan-41".`}},
		{name: "a shared lease behind a pending writer", got: leaseRef{bucket: "b", name: "deploy/prod", epoch: 5, share: "0123456789abcdef"},
			w: lockWait{first: writer, last: writer, took: time.Second},
			want: []string{`When it asked, a writer, "apply-40", waited for its shared holders (epoch 4, since 2026-12-07T12:00:00Z), and this one waited behind it.`,
				"It holds the lock now, shared, at epoch 5 (s3://b/deploy/prod/lock-shared/0000000005/0123456789abcdef.json)."}},
		{name: "state lock file", got: got, w: lockWait{first: file, last: file, took: time.Second},
			want: []string{`the S3 backend's lock file was held by a run without s3lock: dave@ci, lock ID "0b4d", OperationTypeApply.`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := lockWaited(tc.got, tc.w, tc.wholeRun)
			if d.Severity() != diag.SeverityWarning || d.Summary() != `Waited for lock "deploy/prod"` {
				t.Errorf("%v %q; want the warning \"Waited for lock ...\"", d.Severity(), d.Summary())
			}
			for _, w := range tc.want {
				if !strings.Contains(d.Detail(), w) {
					t.Errorf("the detail lacks %q:\n%s", w, d.Detail())
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(d.Detail(), w) {
					t.Errorf("the detail has %q:\n%s", w, d.Detail())
				}
			}
		})
	}
}

// TestAcquisitionFailed: a wait that ran out names the holder (the SDK's
// error) and the setting that raises the wait, the block's own (issue 36:
// the resource's hint named a wait_timeout it does not have); other
// failures are their own diagnostics (superseded) or notAcquired's.
func TestAcquisitionFailed(t *testing.T) {
	l := leaseRef{bucket: "b", name: "deploy/prod"}
	held := fmt.Errorf("s3lock: gave up waiting: %w", &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "alice", Epoch: 3})
	slots := &s3lock.HeldError{Bucket: "b", Name: "deploy/prod", Holder: "alice", Epoch: 3, Key: "deploy/prod/lock-slots/1/lock-0000000003.json"}
	for _, attr := range []string{"timeouts.create", "wait_timeout"} {
		other := map[string]string{"timeouts.create": "wait_timeout", "wait_timeout": "timeouts.create"}[attr]
		for _, err := range []error{held, slots} {
			d := acquisitionFailed(l, err, attr)
			if d.Summary() != acquireFailed || !strings.Contains(d.Detail(), `held by "alice" (epoch 3`) ||
				!strings.Contains(d.Detail(), "(raise "+attr+")") || strings.Contains(d.Detail(), other) {
				t.Errorf("%s, %v: %q\n%s\nwant the holder and \"raise %s\", not %s", attr, err, d.Summary(), d.Detail(), attr, other)
			}
		}
	}
	if d := acquisitionFailed(l, &s3lock.SupersededError{By: "commit-43"}, "wait_timeout"); d.Summary() != "Superseded by a newer run" {
		t.Errorf("superseded: %q", d.Summary())
	}
	if d := acquisitionFailed(l, fmt.Errorf("x: %w", s3lock.ErrAccessDenied), "wait_timeout"); d.Summary() != acquireFailed ||
		strings.Contains(d.Detail(), "wait_timeout") {
		t.Errorf("access denied: %q\n%s", d.Summary(), d.Detail())
	}
	// Without a wait to raise (a force-release that found a slot held),
	// the hint names no setting.
	if h := hintFor("b", "deploy/prod/*", errors.Join(s3lock.ErrHeld)); !strings.Contains(h, "Wait for them,") || strings.Contains(h, "raise") {
		t.Errorf("hintFor a held lock: %q", h)
	}
}

// TestTokenOpFailed_SlotsMismatch: a token whose epoch turns out to be a
// slot lock's marker (Resume's *s3lock.SlotsError) gets "Lock admits
// another number of holders" from a refresh, a renewal and a release, as an
// acquisition does; the reshaping of the diagnostics (issue 37) gave those
// the generic text for a while.
func TestTokenOpFailed_SlotsMismatch(t *testing.T) {
	l := leaseRef{bucket: "b", name: "deploy/prod", epoch: 3}
	err := fmt.Errorf("resuming: %w", &s3lock.SlotsError{Bucket: "b", Name: "deploy/prod", Key: "deploy/prod/lock-0000000003.json", Slots: 3, Want: 1})
	for name, d := range map[string]diag.Diagnostic{"read": notRead(l, err), "renew": notRenewed(l, err), "release": notReleased(l, err)} {
		if d.Summary() != "Lock admits another number of holders" || !strings.Contains(d.Detail(), "Its marker, s3://b/deploy/prod/lock-0000000003.json, records that.") {
			t.Errorf("%s: %q\n%s", name, d.Summary(), d.Detail())
		}
	}
	if d := notRenewed(l, fmt.Errorf("x: %w", s3lock.ErrUnavailable)); d.Summary() != "Could not renew lease" {
		t.Errorf("renew, store unavailable: %q", d.Summary())
	}
}

// TestStoreCheckFailed_CountsWhatRan: the verify action said "N of 6 checks
// did not pass" counting the checks an earlier failure kept from running,
// and "6 of 6" for a missing bucket (issue 36, as the CLI did).
func TestStoreCheckFailed_CountsWhatRan(t *testing.T) {
	missing := storeCheckFailed(storecheck.Report{Bucket: "gone", NoSuchBucket: true,
		Checks: []storecheck.Check{{Name: "conditional writes", Status: storecheck.StatusError}, {Name: "listing order", Status: storecheck.StatusNotChecked}}})
	if d := missing.Detail(); !strings.Contains(d, `Bucket "gone" does not exist (NoSuchBucket), so no check could run`) || strings.Contains(d, "did not pass") {
		t.Errorf("missing bucket: %s", d)
	}
	noPut := storeCheckFailed(storecheck.Report{Bucket: "b", ProbePrefix: "s3lock-probe/", Checks: []storecheck.Check{
		{Name: "conditional writes", Status: storecheck.StatusError}, {Name: "listing order", Status: storecheck.StatusNotChecked},
		{Name: "list", Status: storecheck.StatusOK}, {Name: "get", Status: storecheck.StatusNotChecked},
		{Name: "put", Status: storecheck.StatusDenied, Permission: "s3:PutObject"}, {Name: "delete", Status: storecheck.StatusNotChecked}}})
	if d := noPut.Detail(); !strings.Contains(d, "2 of 6 checks did not pass") || !strings.Contains(d, "3 could not run after them: listing order, get, delete.") {
		t.Errorf("no put: %s", d)
	}
}

// TestDescribeCurrent_SharedHolders: a diagnostic about a lost lease names,
// for a lock held shared now, how many shared holders hold it with one of
// them, and, while a writer waits for them, that writer and its epoch.
func TestDescribeCurrent_SharedHolders(t *testing.T) {
	shares := []s3lock.State{{Holder: "plan-41", Epoch: 3, Held: true}, {Holder: "plan-42", Epoch: 3, Held: true}}
	for _, tc := range []struct {
		name string
		st   s3lock.State
		want string
	}{
		{name: "shared", st: s3lock.State{Name: "deploy/prod", Epoch: 3, Held: true, Shared: true, Holders: shares},
			want: ` The lock is now held by 2 shared holders, e.g. "plan-41".`},
		{name: "one shared holder", st: s3lock.State{Name: "deploy/prod", Epoch: 3, Held: true, Shared: true, Holders: shares[:1]},
			want: ` The lock is now held by one shared holder, "plan-41".`},
		{name: "a writer waits", st: s3lock.State{Name: "deploy/prod", Epoch: 4, Key: "deploy/prod/lock-0000000004.json", Held: true,
			Pending: true, Holder: "apply-40", Holders: shares},
			want: ` The lock is now held by 2 shared holders, e.g. "plan-41"; a writer, "apply-40", waits for them at epoch 4 (s3://b/deploy/prod/lock-0000000004.json).`},
	} {
		if got := describeCurrent("b", tc.st, nil); got != tc.want {
			t.Errorf("%s: describeCurrent = %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
