package s3lock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// State is what a lock's newest epoch object says. A lock that never existed
// has Epoch 0 and Held false.
type State struct {
	Name  string
	Key   string // key of the newest epoch object; "" if none
	Epoch uint64 // newest epoch; 0 if the lock never existed
	// Held is true while the newest lease is neither released nor lapsed
	// (judged by the store's clock).
	Held bool
	// Released is true if the holder (or an operator) released the newest
	// lease. A lease that lapsed is neither Held nor Released.
	Released   bool
	Holder     string
	AcquiredAt time.Time // the holder's clock
	ReleasedAt time.Time // the releaser's clock
	ReleasedBy string    // set by ForceRelease
	// ExpiresAt is when the lease lapses unless renewed, by this client's
	// clock (derived from the store's clock, so skew does not matter).
	ExpiresAt     time.Time
	LeaseDuration time.Duration
	Renewals      uint64
	Metadata      map[string]string
	// Err is set, by List only, for a lock whose newest epoch object could
	// not be read as a lease (a *CorruptLeaseError); the other fields then
	// only name it. Current returns such an error instead.
	Err error
}

// Current reads who holds the lock name now, without acquiring it: one LIST
// and one GET, bounded by ctx.
func (c *Client) Current(ctx context.Context, name string) (State, error) {
	if err := ValidateName(name); err != nil {
		return State{}, err
	}
	newest, found, _, err := c.findNewest(ctx, name)
	if err != nil {
		return State{}, err
	}
	if !found {
		return State{Name: name}, nil
	}
	obs, err := c.getEpoch(ctx, newest.key, newest.epoch, "")
	if err != nil {
		return State{}, err
	}
	return c.stateOf(name, obs), nil
}

func (c *Client) stateOf(name string, o *observed) State {
	s := State{
		Name:          name,
		Key:           o.key,
		Epoch:         o.epoch,
		Released:      o.body.Expired,
		Holder:        o.body.LeaderID,
		AcquiredAt:    o.body.AcquiredAt,
		ReleasedAt:    o.body.ReleasedAt,
		ReleasedBy:    o.body.ReleasedBy,
		LeaseDuration: o.body.validity(),
		Renewals:      o.body.Renewals,
		Metadata:      o.body.Metadata,
	}
	if !o.body.Expired {
		left, ok := remaining(o)
		if !ok {
			left = o.body.validity() + serverSlack
		}
		s.Held = left > 0
		if s.Held {
			s.ExpiresAt = o.received.Add(left)
		}
	}
	return s
}

// List returns the state of every lock whose name starts with prefix, sorted
// by name: for dashboards and policy checks. It lists every key under the
// prefix and reads each lock's newest epoch object (up to eight at a time),
// all bounded by ctx. A lock whose newest object is unreadable is listed
// with State.Err set rather than failing the whole list. Locks under an
// "s3lock-probe" path segment (Verify's) are left out.
func (c *Client) List(ctx context.Context, prefix string) ([]State, error) {
	newest := map[string]listedEpoch{}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(c.bucket), ExpectedBucketOwner: c.owner()}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	p := s3.NewListObjectsV2Paginator(c.api, in)
	for p.HasMorePages() {
		lctx, cancel := c.withTimeout(ctx)
		page, err := p.NextPage(lctx)
		err = c.timedOut(ctx, lctx, err)
		cancel()
		if err != nil {
			return nil, c.opError("ListObjectsV2", prefix, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			name, epoch, ok := parseKey(key)
			if !ok || ValidateName(name) != nil || strings.HasPrefix(key, c.cfg.probePrefix) || isProbeName(name) {
				continue
			}
			if cur, seen := newest[name]; !seen || epoch > cur.epoch {
				newest[name] = listedEpoch{key: key, epoch: epoch}
			}
		}
	}
	names := make([]string, 0, len(newest))
	for n := range newest {
		names = append(names, n)
	}
	slices.Sort(names)
	states := make([]State, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			e := newest[n]
			obs, err := c.getEpoch(ctx, e.key, e.epoch, "")
			if err != nil {
				errs[i] = err
				return
			}
			states[i] = c.stateOf(n, obs)
		}()
	}
	wg.Wait()
	out := states[:0]
	for i, s := range states {
		var corrupt *CorruptLeaseError
		switch {
		case errs[i] == nil:
			out = append(out, s)
		case errors.As(errs[i], &corrupt):
			e := newest[names[i]]
			out = append(out, State{Name: names[i], Key: e.key, Epoch: e.epoch, Err: errs[i]})
		case classify(errs[i]) == failNotFound:
			// Deleted between the LIST and the GET: superseded; skip.
		default:
			return nil, errs[i]
		}
	}
	slices.SortFunc(out, func(a, b State) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// isProbeName reports whether a lock name lies under a probe prefix
// (DefaultProbePrefix as a path segment), where Verify and permission checks
// leave their objects.
func isProbeName(name string) bool {
	return slices.Contains(strings.Split(name, "/"), strings.TrimSuffix(DefaultProbePrefix, "/"))
}
