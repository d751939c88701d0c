package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The provider's face of slot locks (s3lock.Slots, PROTOCOL.md §14): the
// `slots` argument and the `slot` result of the lease resource and the
// ephemeral lease, and what they mean, in one wording. What a slot lock is
// and does is the SDK's: a lock that admits up to n holders, each holding
// one of its n slots, whose epoch is that slot's fencing token.

// defaultSlots is the slots of a lease that does not set it: a mutex
// (s3lock.WithSlots(1) is the plain mutex), as every lock was before slots.
const defaultSlots = 1

// slotsDescription is the MarkdownDescription of the slots argument; wait
// names what bounds the wait (`timeouts.create`, `wait_timeout`) and more
// adds what is particular to the resource or the ephemeral resource.
func slotsDescription(wait, more string) string {
	return fmt.Sprintf("How many holders the lock admits at once, from 1 to %d: `1` (the default) is a plain "+
		"mutex; with n > 1 the lock admits n holders at once (a semaphore), for a pool of n licences, runners or "+
		"connections, and this lease holds one of its n slots (`slot`). While all n slots are held, it waits up to "+
		"%s for the first that frees, as it waits for a held mutex (the diagnostic then says that all n slots are "+
		"held). Every holder of a lock must use the same `slots` — Terraform runs, `s3lock run --slots n` of the "+
		"s3lock CLI and programs using the SDK alike: a lease that asks for another number fails at once with "+
		"\"Lock admits another number of holders\", without waiting.%s", s3lock.MaxSlots, wait, more)
}

// slotDescription is the MarkdownDescription of the slot result.
const slotDescription = "Which of the lock's slots the lease holds, from `1` to `slots`, when `slots` is more " +
	"than 1; `0` for a mutex. `epoch` is the fencing token of this slot: it grows with every holder of the slot, " +
	"not across slots, so pass the slot with it to what the slots guard (slot 2, say, is the second runner)."

// slotsValidators are the validators of the slots argument: the range
// s3lock.Slots accepts, and not with a lock set (`names`), which holds
// mutexes only, as `s3lock run` refuses --slots with a lock set.
func slotsValidators() []validator.Int64 {
	return []validator.Int64{int64validator.Between(1, s3lock.MaxSlots), int64validator.ConflictsWith(path.MatchRoot(namesAttr))}
}

// slotsOf reads a slots argument; null or unknown (before its default
// applies) is the default.
func slotsOf(v types.Int64) int {
	if v.IsNull() || v.IsUnknown() {
		return defaultSlots
	}
	return int(v.ValueInt64())
}

// leaseSlots is how many holders a lease's lock admits, from its token: the
// token's Slots for a slot lease, 1 for a mutex's.
func leaseSlots(t s3lock.Token) int { return max(t.Slots, 1) }
