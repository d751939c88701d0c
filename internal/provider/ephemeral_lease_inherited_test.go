package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestInheritedFrom_ReadsOnlyAWellFormedEnvironmentOfTheLock: the lease of an
// enclosing `s3lock run` is inherited when its environment names this lock
// and agrees with itself; an environment of another lock, or none, is not
// this lock's; one that names this lock (or does not say which) but is
// malformed is an error naming the variable, never a silent fresh
// acquisition, which would wait for the run's own lease.
func TestInheritedFrom_ReadsOnlyAWellFormedEnvironmentOfTheLock(t *testing.T) {
	const bucket, name = "locks", "deploy/prod"
	good := runenv.Lease{Bucket: bucket, Name: name, Epoch: 7, Key: s3lock.Token{Name: name, Epoch: 7}.Key(), Holder: "ci", Slots: 1}
	env := func(l runenv.Lease, change ...string) func(string) string {
		vars := map[string]string{}
		for _, kv := range l.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		for i := 0; i+1 < len(change); i += 2 {
			vars[change[i]] = change[i+1]
		}
		return func(k string) string { return vars[k] }
	}
	slot := runenv.Lease{Bucket: bucket, Name: name, Epoch: 3, Key: s3lock.Token{Name: name, Slot: 2, Epoch: 3}.Key(),
		Holder: "ci", Slot: 2, Slots: 3}
	const share = "0123456789abcdef"
	shared := runenv.Lease{Bucket: bucket, Name: name, Epoch: 5, Key: s3lock.Token{Name: name, Epoch: 5, Share: share}.Key(),
		Holder: "ci", Slots: 1}
	for _, tc := range []struct {
		what    string
		getenv  func(string) string
		want    inheritedLease
		ok      bool
		wantErr string
	}{
		{what: "no s3lock run", getenv: func(string) string { return "" }},
		{what: "a mutex lease of the lock", getenv: env(good), ok: true,
			want: inheritedLease{Bucket: bucket, Name: name, Epoch: 7, Slot: 0, Slots: 1}},
		{what: "a slot lease of the lock", getenv: env(slot), ok: true,
			want: inheritedLease{Bucket: bucket, Name: name, Epoch: 3, Slot: 2, Slots: 3}},
		// A shared run's key is its share's: the run holds the lock shared.
		{what: "a shared lease of the lock", getenv: env(shared), ok: true,
			want: inheritedLease{Bucket: bucket, Name: name, Epoch: 5, Slots: 1, Share: share}},
		{what: "a share of another epoch", getenv: env(shared, runenv.Epoch, "4"), wantErr: runenv.Key},
		{what: "a share of another lock", getenv: env(shared, runenv.Key, s3lock.Token{Name: "other", Epoch: 5, Share: share}.Key()),
			wantErr: runenv.Key},
		{what: "another lock", getenv: env(good, runenv.Name, "other")},
		{what: "the second lock of a set", ok: true, want: inheritedLease{Bucket: bucket, Name: name, Epoch: 4, Slots: 1},
			getenv: env(good, runenv.Name, "a-first", runenv.Epoch, "9", runenv.Key, s3lock.Token{Name: "a-first", Epoch: 9}.Key(),
				runenv.Locks, "2", runenv.Name+"_1", "a-first", runenv.Epoch+"_1", "9", runenv.Key+"_1", s3lock.Token{Name: "a-first", Epoch: 9}.Key(),
				runenv.Name+"_2", name, runenv.Epoch+"_2", "4", runenv.Key+"_2", s3lock.Token{Name: name, Epoch: 4}.Key())},
		{what: "a set without the lock", getenv: env(good, runenv.Name, "a-first", runenv.Locks, "1", runenv.Name+"_1", "a-first")},
		// A run of another lock inside a set's run: the set's variables do
		// not agree with the single-lock ones, so they are not this run's.
		{what: "an outer set's stale variables beside another run's lease",
			getenv: env(good, runenv.Name, "other", runenv.Epoch, "2", runenv.Key, s3lock.Token{Name: "other", Epoch: 2}.Key(),
				runenv.Locks, "2", runenv.Name+"_1", "a-first", runenv.Epoch+"_1", "9", runenv.Key+"_1", s3lock.Token{Name: "a-first", Epoch: 9}.Key(),
				runenv.Name+"_2", name, runenv.Epoch+"_2", "3", runenv.Key+"_2", s3lock.Token{Name: name, Epoch: 3}.Key())},
		{what: "another bucket", getenv: env(good, runenv.Bucket, "other-locks")},
		{what: "an epoch that is no number", getenv: env(good, runenv.Epoch, "seven"), wantErr: runenv.Epoch},
		{what: "a key of another epoch", getenv: env(good, runenv.Key, s3lock.Token{Name: name, Epoch: 6}.Key()), wantErr: runenv.Key},
		{what: "no bucket", getenv: env(good, runenv.Bucket, ""), wantErr: runenv.Bucket},
		{what: "no bucket, another lock", getenv: env(good, runenv.Bucket, "", runenv.Name, "other")},
		{what: "the CLI's default bucket alone", getenv: env(good, runenv.Epoch, "", runenv.Key, "", runenv.Name, "")},
		{what: "a slot without slots", getenv: env(slot, runenv.Slots, ""), wantErr: runenv.Slot},
		{what: "more slots than a lock admits", getenv: env(slot, runenv.Slots, "65", runenv.Key,
			s3lock.Token{Name: name, Slot: 2, Epoch: 3}.Key()), wantErr: runenv.Slots},
	} {
		t.Run(tc.what, func(t *testing.T) {
			got, ok, err := inheritedFrom(tc.getenv, bucket, name)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("inheritedFrom = %+v, %v, %v; want an error naming %s", got, ok, err, tc.wantErr)
				}
			case err != nil || ok != tc.ok || got != tc.want:
				t.Errorf("inheritedFrom = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// TestOpenInherited_ASharedRunCoversOnlySharedLeases: under `s3lock run` of
// a lock held shared, an exclusive lease is refused at once, with a
// diagnostic that names the run's share and the way out, before anything is
// read or waited for (a writer under a reader's share would write beside
// other readers; taking the lock anew would wait for the run's own share).
// An exclusive run's lease is not refused for a shared lease: it covers it.
func TestOpenInherited_ASharedRunCoversOnlySharedLeases(t *testing.T) {
	e := &leaseEphemeralResource{}
	in := inheritedLease{Bucket: "locks", Name: "deploy/prod", Epoch: 5, Slots: 1, Share: "0123456789abcdef"}
	var diags diag.Diagnostics
	// No client: the refusal comes before any request.
	if _, _, ok := e.openInherited(t.Context(), nil, in, openSettings{slots: 1}, &diags); ok || !diags.HasError() {
		t.Fatalf("an exclusive lease under a shared run: ok %v, diagnostics %v; want it refused", ok, diags)
	}
	d := diags.Errors()[0]
	for _, want := range []string{`Lock "deploy/prod" in bucket "locks"`, in.ref().token().Key(), "holds it shared",
		runenv.Key, `asks for an exclusive lease (mode = "exclusive"`, `Set mode = "shared"`} {
		if !strings.Contains(d.Summary()+" "+d.Detail(), want) {
			t.Errorf("diagnostic %q: %q does not say %q", d.Summary(), d.Detail(), want)
		}
	}
	for _, tc := range []struct {
		held   s3lock.Token
		shared bool
		want   bool
	}{
		{held: s3lock.Token{Epoch: 1}, shared: false, want: true},
		{held: s3lock.Token{Epoch: 1}, shared: true, want: true},
		{held: s3lock.Token{Epoch: 1, Share: "0123456789abcdef"}, shared: true, want: true},
		{held: s3lock.Token{Epoch: 1, Share: "0123456789abcdef"}, shared: false, want: false},
	} {
		if got := covers(tc.held, tc.shared); got != tc.want {
			t.Errorf("covers(%+v, shared %v) = %v, want %v", tc.held, tc.shared, got, tc.want)
		}
	}
}
