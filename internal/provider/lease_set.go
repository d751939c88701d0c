package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/lockset"
)

// The provider's face of lock sets (package lockset, PROTOCOL.md §16): the
// `names` argument and the `leases` result of the lease resource and the
// ephemeral lease, and what they mean, in one wording. What a set is and
// does is the SDK's: several locks taken in one global order (the names
// sorted), all or none; lockset.Check is its rule for a set's names.
//
// `names` is a list, not a set, of strings: it reads as `s3lock run a b`
// does, and a name written twice reaches the SDK, which refuses it, where
// Terraform would merge it into a set without a word. The order it is
// written in does not matter: the set's order is the SDK's.

// namesAttr is the argument that takes a lock set.
const namesAttr = "names"

// namesDescription is the MarkdownDescription of the names argument; wait
// names what bounds the wait and more adds what is particular to the
// resource or the ephemeral resource.
func namesDescription(wait, more string) string {
	return fmt.Sprintf("Names of the locks of a lock set, taken together, all or none, instead of the one lock "+
		"`name` takes (set exactly one of `name` and `names`): 1 to 64 distinct lock names, such as "+
		"`[\"net/prod\", \"db/prod\"]`. Every lock set takes its locks in one order, the names sorted, whatever "+
		"order they are written in, so two runs that take `[\"a\", \"b\"]` and `[\"b\", \"a\"]` never wait for each "+
		"other in a cycle: the second to take the first lock waits until the first set is released. While it "+
		"waits for a held lock, the set holds the locks before it in that order and none after; %s bounds the "+
		"wait for each lock (not the set's: a set of n locks may wait up to n times as long), and when a wait ends without the lock, what the set had taken is released. Each "+
		"lease of the set is held, renewed and released as the lease of one lock is, and losing any of them is "+
		"losing the set. `leases` gives each lock's epoch, the fencing token of that lock's writes. Runs of "+
		"`s3lock run a b -- ...` of the s3lock CLI and programs using the SDK's lock sets take the same "+
		"locks in the same order. A lock set holds mutexes only: `slots` cannot be set with `names`.%s", wait, more)
}

// leasesDescription is the MarkdownDescription of the leases result.
const leasesDescription = "The leases held, one per lock, in the set's order (the names sorted): each lock's " +
	"`name`, `epoch` (the fencing token of that lock's writes: pass each to what its lock guards) and `key` (the " +
	"lease's epoch object). With `name`, the one lease. With `names`, `epoch` and `key` are those of the first " +
	"lease of this list, as `s3lock run` of a lock set gives its command the first lock's in `" + runenv.Epoch + "`."

// leasesLostDescription ends the resource's leases description.
const leasesLostDescription = " A lease a refresh found lost has `epoch` 0 and no `key` until the next apply " +
	"replaces the resource."

// leaseSetElemType is the type of an element of leases.
var leaseSetElemType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"name": types.StringType, "epoch": types.Int64Type, "key": types.StringType,
}}

// nameValidators are the validators of the name argument of a lease: a
// valid lock name, and exactly one of name and names.
func nameValidators() []validator.String {
	return []validator.String{lockNameValidator{}, stringvalidator.ExactlyOneOf(path.MatchRoot(namesAttr))}
}

// lockSetValidator checks a lock set's names with lockset.Check, so that the
// provider, the CLI and the SDK accept the same sets.
type lockSetValidator struct{}

var _ validator.List = lockSetValidator{}

func (lockSetValidator) Description(context.Context) string {
	return "must be 1 to 64 distinct valid lock names"
}

func (v lockSetValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (lockSetValidator) ValidateList(ctx context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	names, known := knownNames(ctx, req.ConfigValue)
	if !known {
		return
	}
	if _, err := lockset.Check(names); err != nil {
		resp.Diagnostics.Append(invalidLockSet(req.Path, names, err))
	}
}

// knownNames returns a names value's strings; known is false while the value
// or any of its elements is null or unknown (nothing to check yet).
func knownNames(ctx context.Context, v types.List) (names []string, known bool) {
	if v.IsNull() || v.IsUnknown() {
		return nil, false
	}
	for _, e := range v.Elements() {
		if e.IsNull() || e.IsUnknown() {
			return nil, false
		}
	}
	if d := v.ElementsAs(ctx, &names, false); d.HasError() {
		return nil, false
	}
	return names, true
}

// setNames reads a lease's names argument, in the set's order; nil when it
// is not set (the lease takes name). A set lockset.Check refuses is an error
// diagnostic on names (the validator said so before, where Terraform
// validates).
func setNames(ctx context.Context, v types.List, diags *diag.Diagnostics) []string {
	names, known := knownNames(ctx, v)
	if !known {
		return nil
	}
	order, err := lockset.Check(names)
	if err != nil {
		diags.Append(invalidLockSet(path.Root(namesAttr), names, err))
		return nil
	}
	return order
}

// leasesValue is the leases result of tokens, in their order.
func leasesValue(tokens []s3lock.Token) types.List {
	elems := make([]attr.Value, 0, len(tokens))
	for _, t := range tokens {
		key := types.StringValue(t.Key())
		if t.Epoch == lostEpoch {
			key = types.StringNull() // not an epoch object's key (lock-0000000000 is none)
		}
		elems = append(elems, types.ObjectValueMust(leaseSetElemType.AttrTypes, map[string]attr.Value{
			"name": types.StringValue(t.Name), "epoch": types.Int64Value(int64(t.Epoch)), "key": key,
		}))
	}
	return types.ListValueMust(leaseSetElemType, elems)
}

// acquireSet takes the lock set names as acquireLease takes one lock: each
// lock waits up to wait (lockset.Acquire's WithWait), and the wait is
// reported as acquireLease reports it. The set's leases renew themselves
// while it waits for the later ones; a caller that hands them on Detaches
// the set.
func acquireSet(ctx context.Context, f *clientFactory, c *s3lock.Client, names []string, wait time.Duration, opts ...s3lock.Option) (*lockset.Set, lockWait, error) {
	rec, opts := waitOptions(ctx, f, wait, opts)
	set, err := lockset.Acquire(ctx, c, names, opts...)
	if err == nil {
		tokens := setTokens(set)
		tflog.Info(ctx, "acquired lock set", map[string]any{"bucket": tokens[0].Bucket, "locks": names,
			"epochs": epochsOf(tokens)})
	}
	return set, rec.done(), err
}

// setTokens are the tokens of a set's leases, in its order.
func setTokens(set *lockset.Set) []s3lock.Token {
	var tokens []s3lock.Token
	for _, l := range set.Leases() {
		tokens = append(tokens, l.Token())
	}
	return tokens
}

// epochsOf lists tokens' epochs, for logs.
func epochsOf(tokens []s3lock.Token) []uint64 {
	epochs := make([]uint64, 0, len(tokens))
	for _, t := range tokens {
		epochs = append(epochs, t.Epoch)
	}
	return epochs
}

// waitedIn is the lease of tokens whose lock a set's wait ended on (the
// last holder it saw), for lockWaited: the first lease when the wait saw no
// holder it can name.
func waitedIn(tokens []s3lock.Token, w lockWait) s3lock.Token {
	var held *s3lock.HeldError
	if errors.As(w.last, &held) {
		for _, t := range tokens {
			if t.Name == held.Name {
				return t
			}
		}
	}
	return tokens[0]
}
