package provider

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// An ephemeral lease of a lock set (`names`): the set's leases, one per
// lock, in the set's order, each in the lifecycle the lease of one lock
// would have — inherited from `s3lock run`, held for the whole run by the
// run's guard, or for one phase — chosen once for the whole set. The set is
// taken all or none (lockset.Acquire); each lease is then renewed, checked
// and released as a lease of one lock is, so losing any of them is what
// losing the lease of one lock is (a diagnostic; for the whole run, the
// guard interrupts terraform).

// openSet chooses the set's lifecycle, as open does for one lock, and opens
// it: the leases of an enclosing `s3lock run` when it holds every lock of
// the set; an error when it holds some of them only; else the set for the
// whole run or for this phase.
func (e *leaseEphemeralResource) openSet(ctx context.Context, client *s3lock.Client, bucket string, names []string, set openSettings, diags *diag.Diagnostics) (leaseLife, []openedLease, bool) {
	ins, missing, bad, err := inheritedSetFrom(os.Getenv, bucket, names)
	switch {
	case err != nil:
		diags.Append(inheritedMalformed(leaseRef{bucket: bucket, name: bad}, err))
		return nil, nil, false
	case len(ins) > 0 && len(missing) > 0:
		diags.Append(inheritedSetPartly(bucket, inheritedNames(ins), missing))
		return nil, nil, false
	case len(ins) > 0:
		return e.openInheritedSet(ctx, client, ins, set.shared, diags)
	case set.scope == scopeRun:
		return e.openRunSet(ctx, client, bucket, names, set, diags)
	}
	return e.openPhaseSet(ctx, client, bucket, names, set, diags)
}

// inheritedSetFrom returns the leases an enclosing `s3lock run` holds of the
// set's locks (inheritedFrom of each) and the names it holds none of; err
// (about the lock bad) when its environment names a lock of the set but is
// malformed.
func inheritedSetFrom(getenv func(string) string, bucket string, names []string) (ins []inheritedLease, missing []string, bad string, err error) {
	for _, name := range names {
		in, ok, err := inheritedFrom(getenv, bucket, name)
		switch {
		case err != nil:
			return nil, nil, name, err
		case ok:
			ins = append(ins, in)
		default:
			missing = append(missing, name)
		}
	}
	return ins, missing, "", nil
}

// inheritedNames are the names of inherited leases.
func inheritedNames(ins []inheritedLease) []string {
	names := make([]string, 0, len(ins))
	for _, in := range ins {
		names = append(names, in.Name)
	}
	return names
}

// openInheritedSet uses the leases of the enclosing `s3lock run`, each
// checked as openInherited checks the lease of one lock.
func (e *leaseEphemeralResource) openInheritedSet(ctx context.Context, client *s3lock.Client, ins []inheritedLease, shared bool, diags *diag.Diagnostics) (leaseLife, []openedLease, bool) {
	life := setLife{kindOf: lifeInherited}
	var got []openedLease
	for _, in := range ins {
		member, opened, ok := e.openInherited(ctx, client, in, openSettings{slots: defaultSlots, shared: shared}, diags)
		if !ok {
			return nil, nil, false
		}
		life.members = append(life.members, member)
		got = append(got, opened)
	}
	return life, got, true
}

// openPhaseSet takes the set for this phase: its leases renew themselves in
// this process (the leaseRegistry keeps each) until Close releases them.
func (e *leaseEphemeralResource) openPhaseSet(ctx context.Context, client *s3lock.Client, bucket string, names []string, set openSettings, diags *diag.Diagnostics) (leaseLife, []openedLease, bool) {
	s, waited, err := acquireSet(ctx, e.factory, client, names, set.wait, set.acquireOptions()...)
	if err != nil {
		diags.Append(setAcquisitionFailed(bucket, names, err, waitTimeoutAttr))
		return nil, nil, false
	}
	if waited.waited() {
		diags.Append(lockWaited(tokenRef(waitedIn(setTokens(s), waited)), waited, false))
	}
	life := setLife{kindOf: lifePhase}
	var got []openedLease
	for _, l := range s.Leases() {
		e.factory.leases.add(l)
		life.members = append(life.members, phaseLife{e: e, token: l.Token()})
		got = append(got, phaseOpened(l))
	}
	return life, got, true
}

// openRunSet opens the run's leases of the set's locks: the ones the run
// holds already (another block of the run took the same set), or a set it
// takes now, all or none, and hands to the run's guard lease by lease. The
// guard's claims are taken in the set's order, so two blocks that take
// sets sharing locks wait for each other in that order, never in a cycle.
func (e *leaseEphemeralResource) openRunSet(ctx context.Context, client *s3lock.Client, bucket string, names []string, set openSettings, diags *diag.Diagnostics) (leaseLife, []openedLease, bool) {
	first := leaseRef{bucket: bucket, name: names[0]}
	if e.factory.run == nil {
		diags.Append(wholeRunUnavailable(first, e.factory.whyNoRun()))
		return nil, nil, false
	}
	if set.dur < runguard.MinimumLease {
		diags.Append(leaseTooShortForRun(first, set.dur, runguard.MinimumLease))
		return nil, nil, false
	}
	c := runSetClaim{e: e, run: e.factory.run, cfg: e.factory.runGuardConfig(client), bucket: bucket, shared: set.shared}
	defer c.done()
	if !c.claim(ctx, names, diags) {
		return nil, nil, false
	}
	if len(c.granted) > 0 && len(c.held) > 0 {
		c.abandon(ctx, c.granted)
		diags.Append(runSetPartlyHeld(bucket, c.heldNames(), c.granted))
		return nil, nil, false
	}
	if len(c.granted) > 0 && !c.acquire(ctx, client, set, diags) {
		return nil, nil, false
	}
	life := setLife{kindOf: lifeRun}
	var got []openedLease
	for _, held := range c.held {
		life.members = append(life.members, runLife{e: e, token: held.Token})
		got = append(got, runOpened(held))
	}
	return life, got, true
}

// runSetClaim is openRunSet's claim of a set's locks from the run's guard:
// the leases the run holds already (held) and the locks the guard granted
// this process the right to acquire (granted), in the set's order.
type runSetClaim struct {
	e       *leaseEphemeralResource
	run     *runguard.Client
	cfg     runguard.ClientConfig
	bucket  string
	shared  bool // the set asks for shared leases
	held    []*runguard.Lease
	granted []string
	turns   []func()
}

// claim takes each lock's turn in this process (runClaims) and claims it
// from the guard, in the set's order; on an error it abandons what it was
// granted.
func (c *runSetClaim) claim(ctx context.Context, names []string, diags *diag.Diagnostics) bool {
	for _, name := range names {
		lock := leaseRef{bucket: c.bucket, name: name}
		done, err := c.e.factory.claims.take(ctx, c.bucket+"/"+name)
		if err != nil {
			c.abandon(ctx, c.granted)
			diags.Append(notAcquired(lock, errWaitingForBlock(err)))
			return false
		}
		c.turns = append(c.turns, done)
		held, err := c.run.Claim(ctx, c.cfg, c.bucket, name)
		switch {
		case err != nil:
			c.abandon(ctx, c.granted)
			diags.Append(guardUnreachable(lock, err))
			return false
		case held == nil:
			c.granted = append(c.granted, name)
			continue
		case held.Lost != "":
			diags.Append(runLeaseGone(held))
		case leaseSlots(held.Token) != defaultSlots:
			diags.Append(runSlotsMismatch(lock, held.Token, defaultSlots))
		case !covers(held.Token, c.shared):
			diags.Append(runHoldsShared(tokenRef(held.Token)))
		default:
			c.held = append(c.held, held)
			continue
		}
		c.abandon(ctx, c.granted)
		return false
	}
	return true
}

// acquire takes the granted locks (all of the set's) as a set and hands
// each lease to the guard, which then holds them as the run's. A lease the
// guard refuses is released, with those after it; the guard releases those
// it adopted when the run ends (the run fails: the set is not held).
func (c *runSetClaim) acquire(ctx context.Context, client *s3lock.Client, set openSettings, diags *diag.Diagnostics) bool {
	s, waited, err := acquireSet(ctx, c.e.factory, client, c.granted, set.wait, set.acquireOptions()...)
	if err != nil {
		c.abandon(ctx, c.granted)
		diags.Append(setAcquisitionFailed(c.bucket, c.granted, err, waitTimeoutAttr))
		return false
	}
	tokens := s.Detach()
	for i, token := range tokens {
		adopted, err := c.run.Adopt(ctx, token, c.cfg)
		if err != nil {
			diags.Append(guardRefused(tokenRef(token), err, c.e.releaseToken(ctx, token)))
			for _, rest := range tokens[i+1:] {
				_ = c.e.releaseToken(ctx, rest)
				_ = c.run.Abandon(ctx, c.cfg, c.bucket, rest.Name)
			}
			return false
		}
		c.held = append(c.held, adopted)
	}
	tflog.Info(ctx, "acquired lock set for this run; it is held until terraform exits", map[string]any{
		"bucket": c.bucket, "locks": c.granted, "epochs": epochsOf(tokens)})
	if waited.waited() {
		diags.Append(lockWaited(tokenRef(waitedIn(tokens, waited)), waited, true))
	}
	if why := c.run.Run().EndsWithTerraform(); why != "" {
		diags.Append(runLeaseLapsesAfterRun(tokenRef(tokens[0]), set.dur, why))
	}
	return true
}

// abandon gives up the guard's grants of names.
func (c *runSetClaim) abandon(ctx context.Context, names []string) {
	for _, name := range names {
		_ = c.run.Abandon(ctx, c.cfg, c.bucket, name)
	}
}

// done ends this process's turns of the set's locks.
func (c *runSetClaim) done() {
	for _, done := range slices.Backward(c.turns) {
		done()
	}
}

// heldNames are the names of the locks the run held already.
func (c *runSetClaim) heldNames() []string {
	names := make([]string, 0, len(c.held))
	for _, h := range c.held {
		names = append(names, h.Token.Name)
	}
	return names
}

// setLife is the lifecycle of a lock set's leases: one lifecycle of one
// kind (kindOf) per lock, in the set's order. Renew asks each and renews
// when the first is due; Close closes each, the last taken first (for a
// phase: releases the set).
type setLife struct {
	kindOf  string
	members []leaseLife
}

// privateSetKey marks, in an ephemeral lease's private data, the lease of a
// lock set: its value is a storedSet as JSON.
const privateSetKey = "lock_set"

// storedSet is a setLife in private data: its leases' tokens (for the whole
// run or a phase), or the leases inherited from `s3lock run`.
type storedSet struct {
	Tokens    []string         `json:"tokens,omitempty"`
	Inherited []inheritedLease `json:"inherited,omitempty"`
}

func (l setLife) kind() string { return l.kindOf }

func (l setLife) store(ctx context.Context, p privateSetter) diag.Diagnostics {
	var stored storedSet
	for _, m := range l.members {
		switch m := m.(type) {
		case runLife:
			stored.Tokens = append(stored.Tokens, m.token.String())
		case phaseLife:
			stored.Tokens = append(stored.Tokens, m.token.String())
		case inheritedLife:
			stored.Inherited = append(stored.Inherited, m.in)
		}
	}
	raw, _ := json.Marshal(stored) // strings and numbers: it cannot fail
	return p.SetKey(ctx, privateSetKey, raw)
}

func (l setLife) renew(ctx context.Context, diags *diag.Diagnostics) (time.Time, bool) {
	var next time.Time
	held := true
	for _, m := range l.members {
		at, ok := m.renew(ctx, diags)
		switch {
		case !ok:
			held = false
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	return next, held
}

func (l setLife) close(ctx context.Context, diags *diag.Diagnostics) {
	for _, m := range slices.Backward(l.members) {
		m.close(ctx, diags)
	}
}

// loadSet returns the setLife of kind that setLife.store recorded in p;
// found is false when p holds no lock set.
func (e *leaseEphemeralResource) loadSet(ctx context.Context, p privateGetter, kind string, diags *diag.Diagnostics) (life leaseLife, found, ok bool) {
	raw, _ := p.GetKey(ctx, privateSetKey)
	var stored storedSet
	if len(raw) == 0 || json.Unmarshal(raw, &stored) != nil {
		return nil, false, false
	}
	set := setLife{kindOf: kind}
	for _, in := range stored.Inherited {
		set.members = append(set.members, inheritedLife{e: e, in: in})
	}
	for _, raw := range stored.Tokens {
		token, err := s3lock.ParseToken(raw)
		if err != nil {
			diags.Append(unreadableToken(err))
			return nil, true, false
		}
		switch kind {
		case lifeRun:
			set.members = append(set.members, runLife{e: e, token: token})
		case lifePhase:
			set.members = append(set.members, phaseLife{e: e, token: token})
		}
	}
	if len(set.members) == 0 {
		diags.Append(missingToken())
		return nil, true, false
	}
	return set, true, true
}
