package provider

import (
	"fmt"
	"path"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The provider's face of shared leases (s3lock.WithShared, PROTOCOL.md §17):
// the `mode` argument of the lease resource and the ephemeral lease, the
// `mode` and `pending` results of the data sources, and what they mean, in
// one wording. What a shared lease is and does is the SDK's: any number of
// shared holders hold a lock together, or one exclusive holder alone; an
// exclusive acquirer that finds shared holders waits for them, and no new
// shared holder joins meanwhile.

// modeAttr is the argument that chooses a shared or an exclusive lease.
const modeAttr = "mode"

// The modes of a lease.
const (
	// modeExclusive, the default: the lease holds the lock alone, as every
	// lease did before shared leases.
	modeExclusive = "exclusive"
	// modeShared: the lease holds the lock together with any other shared
	// leases of it (s3lock.WithShared).
	modeShared = "shared"
)

// modeDescription is the MarkdownDescription of the mode argument; wait
// names what bounds the wait (`timeouts.create`, `wait_timeout`) and more
// adds what is particular to the resource or the ephemeral resource.
func modeDescription(wait, more string) string {
	return fmt.Sprintf("How the lease holds the lock. `%q` (the default): alone, as a writer — it waits up to %s "+
		"while anyone else holds the lock, exclusive or shared. `%q`: together with every other shared lease of the "+
		"lock, as a reader — any number of shared leases hold it at once, and an exclusive lease waits until all of "+
		"them are released (\"plans share, applies exclude\"). Once an exclusive lease waits for the shared holders, "+
		"no new shared lease joins them: it waits behind that writer, so a stream of readers cannot starve it. Take "+
		"a shared lease only for work that never writes what the lock guards (a plan, a report): nothing stops a "+
		"shared holder from writing, and the shared holders of one epoch share that `epoch`, so a fenced write "+
		"cannot tell them apart. A shared lease's `key` is its share's object, "+
		"`<name>/lock-shared/<epoch>/<share>.json`. `mode = \"shared\"` does not go with `slots` > 1. With `names`, "+
		"a shared set takes every lock of the set shared. Shared leases of the s3lock CLI and of programs using the "+
		"SDK's `WithShared` share the lock in the same way.%s", modeExclusive, wait, modeShared, more)
}

// modeValidators are the validators of the mode argument.
func modeValidators() []validator.String {
	return []validator.String{stringvalidator.OneOf(modeExclusive, modeShared)}
}

// sharedOf reads a mode argument: whether it asks for a shared lease. Null
// or unknown (before its default applies) is the default, exclusive.
func sharedOf(v types.String) bool {
	return !v.IsNull() && !v.IsUnknown() && v.ValueString() == modeShared
}

// modeName is the mode a lease asks for, as the mode attribute writes it.
func modeName(shared bool) string {
	if shared {
		return modeShared
	}
	return modeExclusive
}

// modeOptions are the acquisition options of a mode.
func modeOptions(shared bool) []s3lock.Option {
	if shared {
		return []s3lock.Option{s3lock.WithShared()}
	}
	return nil
}

// covers reports whether a lease that a run already holds, held (a share
// when held.Share is set), serves a block that asks for a shared lease
// (wantShared) or an exclusive one: an exclusive lease covers either (it
// excludes everyone else, readers too), a shared one covers only a shared
// block (a writer under a reader's share would write beside other readers).
func covers(held s3lock.Token, wantShared bool) bool {
	return held.Share == "" || wantShared
}

// checkSharedSlots is the plan-time check of mode with slots: a shared lease
// of a slot lock is refused (the SDK refuses WithShared with WithSlots); nil
// when they go together or are not known yet.
func checkSharedSlots(mode types.String, slots types.Int64) diag.Diagnostic {
	if !sharedOf(mode) || slots.IsNull() || slots.IsUnknown() || slots.ValueInt64() <= defaultSlots {
		return nil
	}
	return sharedWithSlots(int(slots.ValueInt64()))
}

// shareOfKey returns the share id of the share key of lock name under shared
// epoch epoch, or "" when key is not such a key (an epoch's, or a slot's).
// The id is the key's base name; the SDK's Token.Key says whether the key is
// that share's, so the provider keeps no copy of the SDK's key layout.
func shareOfKey(name string, epoch uint64, key string) string {
	id := strings.TrimSuffix(path.Base(key), ".json")
	if id == "" || key != (s3lock.Token{Name: name, Epoch: epoch, Share: id}).Key() {
		return ""
	}
	return id
}

// lockModeValue is the mode of a lock as the data sources show it: null
// while nobody holds it (as holder is), "shared" while shared holders hold
// it (also while a writer waits for them: pending), "exclusive" while one
// exclusive holder holds it, or, for a slot lock, its slots' holders (each
// holds its slot alone).
func lockModeValue(st s3lock.State) types.String {
	switch {
	case !st.Held:
		return types.StringNull()
	case st.Shared || st.Pending:
		return types.StringValue(modeShared)
	}
	return types.StringValue(modeExclusive)
}

// modeResultDescription is the MarkdownDescription of the data sources'
// mode result.
const modeResultDescription = "How the lock is held now: `\"exclusive\"` (by one holder, whom `holder` names; for " +
	"a lock that admits several holders, by the holders of its slots), `\"shared\"` (by the shared holders that " +
	"`holders` lists, such as leases with `mode = \"shared\"`; also while a writer waits for them, see " +
	"`pending`), or null while nobody holds it."

// pendingDescription is the MarkdownDescription of the data sources'
// pending result.
const pendingDescription = "Whether an exclusive acquirer (a writer) waits for the shared holders that `holders` " +
	"lists: it has taken the lock's newest epoch, `holder` names it, and it holds the lock alone once they are " +
	"all released or have lapsed; no new shared holder joins meanwhile. `false` otherwise."
