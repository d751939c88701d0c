package s3lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Token identifies a held lease so that another process can take it over
// (Resume): a pipeline step that acquires, and a later one that releases.
// The nonce is what proves the lease is the one this token was made for;
// treat a token like a lock's key.
type Token struct {
	Bucket string `json:"bucket"`
	Name   string `json:"name"`
	Epoch  uint64 `json:"epoch"`
	Nonce  string `json:"nonce"`
}

// String returns the token as JSON.
func (t Token) String() string {
	b, _ := json.Marshal(t)
	return string(b)
}

// ParseToken reads a token written by Token.String.
func ParseToken(s string) (Token, error) {
	var t Token
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return Token{}, invalid("lease token is not valid JSON: %v", err)
	}
	// Never echo the token: its nonce is what releases the lease.
	var missing []string
	for _, f := range []struct {
		name  string
		empty bool
	}{{"bucket", t.Bucket == ""}, {"name", t.Name == ""}, {"epoch", t.Epoch == 0}, {"nonce", t.Nonce == ""}} {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(missing) > 0:
		return Token{}, invalid("lease token lacks %s", strings.Join(missing, ", "))
	case t.Epoch > MaxEpoch:
		return Token{}, invalid("lease token epoch %d is beyond the maximum %d", t.Epoch, MaxEpoch)
	}
	if err := ValidateName(t.Name); err != nil {
		return Token{}, err
	}
	return t, nil
}

// Resume takes over the lease a token names, if it is still held: the
// lock's newest epoch, not released, not lapsed, and still carrying the
// token's nonce. If the lease was released by its holder (a release already
// done), the error matches ErrReleased; if it was lost (lapsed,
// force-released, superseded), it matches ErrLeaseLost; ErrNoSuchEpoch if the
// epoch object is gone. The resumed lease trusts itself only for what is
// left of the lease as judged by the store's clock, and renews itself unless
// WithoutAutoRenew is given. It costs one LIST and one GET; ctx bounds them.
//
// Resume is a takeover: the handle the token came from must not be used any
// more (Detach it, or let its process end). If both are, the next renewal of
// one of them finds the other's write and ends that handle as lost; until
// then both believe they hold the lease, as with ForceRelease.
func (c *Client) Resume(ctx context.Context, t Token, opts ...AcquireOption) (*Lease, error) {
	if t.Bucket != c.bucket {
		return nil, invalid("lease token is for bucket %s, but this client locks in bucket %s", t.Bucket, c.bucket)
	}
	if t.Nonce == "" {
		return nil, invalid("lease token has no nonce")
	}
	return c.takeOver(ctx, t.Name, t.Epoch, t.Nonce, opts)
}

// Adopt takes over the current lease of a lock by its epoch, whoever
// acquired it: for importing a lease into Terraform, or for an operator who
// must finish a crashed holder's work. It refuses (ErrStaleEpoch) unless the
// epoch is the lock's newest and its lease is held. Like Resume, it is a
// takeover: the original holder must have stopped using its handle. It costs
// one LIST and one GET; ctx bounds them.
func (c *Client) Adopt(ctx context.Context, name string, epoch uint64, opts ...AcquireOption) (*Lease, error) {
	return c.takeOver(ctx, name, epoch, "", opts)
}

// takeOver builds a Lease for an existing epoch object; nonce "" accepts
// any holder.
func (c *Client) takeOver(ctx context.Context, name string, epoch uint64, nonce string, opts []AcquireOption) (*Lease, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := validateEpoch(epoch); err != nil {
		return nil, err
	}
	a, err := c.acquireConfig(opts)
	if err != nil {
		return nil, err
	}
	key := Key(name, epoch)
	stale := func(reason string) error {
		if nonce == "" {
			return fmt.Errorf("%w: epoch %d of lock %q in bucket %s %s", ErrStaleEpoch, epoch, name, c.bucket, reason)
		}
		return &LeaseLostError{Bucket: c.bucket, Key: key, Epoch: epoch, Reason: reason}
	}
	// Only the newest epoch can be held: an older one may look alive (a
	// renewal that reached the store after its holder gave up) while the
	// lock has moved on.
	newest, found, _, err := c.findNewest(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case !found || newest.epoch < epoch:
		return nil, fmt.Errorf("%w: s3://%s/%s does not exist", ErrNoSuchEpoch, c.bucket, key)
	case newest.epoch > epoch:
		return nil, stale(fmt.Sprintf("was superseded (the lock is at epoch %d)", newest.epoch))
	}
	obs, err := c.getEpoch(ctx, key, epoch, "")
	if classify(err) == failNotFound {
		return nil, fmt.Errorf("%w: s3://%s/%s does not exist", ErrNoSuchEpoch, c.bucket, key)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case nonce != "" && obs.body.Nonce != nonce:
		return nil, stale("belongs to another acquisition (holder " + obs.body.LeaderID + ")")
	case nonce != "" && obs.body.Expired && obs.body.ReleasedBy == "" && obs.body.Reason == "":
		return nil, fmt.Errorf("%w: s3://%s/%s (epoch %d) was released by its holder", ErrReleased, c.bucket, key, epoch)
	case obs.body.Expired && obs.body.ReleasedBy != "":
		return nil, stale("was force-released by " + obs.body.ReleasedBy)
	case obs.body.Expired:
		return nil, stale("was released")
	case obs.body.Nonce == "":
		return nil, stale("was not written by s3lock and cannot be taken over")
	}
	age, ok := obs.serverAge()
	if !ok {
		return nil, &OpError{Op: "GetObject", Bucket: c.bucket, Key: key,
			Err: errors.New("the store sent no Date or Last-Modified, so the lease's age is unknown")}
	}
	// The store's Date may be up to dateStaleness behind real time (its
	// one-second resolution, and a server that refreshes it once a second):
	// assume the lease is that much older than it looks, and count from
	// before the read was sent, so that the estimate is never later than
	// the original holder's own deadline.
	validity := obs.body.validity()
	trustFrom := obs.sent.Add(-age - dateStaleness)
	trustUntil := trustFrom.Add(validity - safetyMargin(validity))
	if !c.cfg.clock.Now().Before(trustUntil) {
		return nil, stale("has lapsed (last written " + age.String() + " ago, lease " + validity.String() + ")")
	}
	lease := c.newLease(name, epoch, *obs.body, obs.etag, trustFrom, trustUntil, c.renewIntervalFor(validity), a.autoRenew)
	lease.startBackground()
	return lease, nil
}

// validateEpoch checks that epoch can name an epoch object.
func validateEpoch(epoch uint64) error {
	if epoch == 0 || epoch > MaxEpoch {
		return invalid("epoch %d is outside [1, %d]", epoch, MaxEpoch)
	}
	return nil
}
