package s3lock

import "context"

// pageSize is the LIST page size: S3's maximum.
const pageSize = 1000

// findNewest returns the lock's newest epoch object (found false when it has
// none) and the first LIST page, which cleanup uses.
//
// Because old epochs are deleted, a lock's epoch objects fit in one page and
// this costs one LIST however many epochs the lock has had. When they do not
// fit (history written by another tool, or a burst of more acquisitions than
// cleanup may yet delete), it gallops over the key space: O(log n) LISTs.
func (c *Client) findNewest(ctx context.Context, name string) (newest listedEpoch, found bool, first *listed, err error) {
	first, err = c.listEpochs(ctx, name, "")
	if err != nil {
		return listedEpoch{}, false, nil, err
	}
	newest, found = first.newest()
	if !first.truncated {
		return newest, found, first, nil
	}
	s := &newestSearch{epochLister: epochLister{c: c, name: name}, best: newest, found: found}
	if err := s.run(ctx); err != nil {
		return listedEpoch{}, false, nil, err
	}
	return s.best, s.found, first, nil
}

// newestSearch looks for a lock's newest epoch beyond a truncated first
// page: it gallops, bisects, then pages through what is left, keeping the
// newest epoch any LIST showed. Each LIST lists only keys after the one it
// starts after (or the search fails: epochLister), so the gallop and the
// bisection narrow with every LIST and the paging moves on.
type newestSearch struct {
	epochLister
	best  listedEpoch
	found bool
}

func (s *newestSearch) run(ctx context.Context) error {
	lo, hi, done, err := s.gallop(ctx)
	if err != nil || done {
		return err
	}
	lo, done, err = s.bisect(ctx, lo, hi)
	if err != nil || done {
		return err
	}
	return s.page(ctx, lo)
}

// list lists the page after key and keeps its newest epoch if it is the
// newest yet.
func (s *newestSearch) list(ctx context.Context, after string) (*listed, error) {
	l, err := s.epochLister.list(ctx, after)
	if err != nil {
		return nil, err
	}
	s.keep(l)
	return l, nil
}

// keep keeps the newest epoch of l if it is the newest yet.
func (s *newestSearch) keep(l *listed) {
	if n, ok := l.newest(); ok && n.epoch > s.best.epoch {
		s.best, s.found = n, true
	}
}

// gallop probes ever further until a probe sees the end of the keys. It
// returns the range (lo, hi] the newest epoch is in, or done when a probe
// saw it.
func (s *newestSearch) gallop(ctx context.Context) (lo, hi uint64, done bool, err error) {
	lo, hi = s.best.epoch, MaxEpoch
	for step := uint64(pageSize); ; step *= 2 {
		probe := min(lo+step, MaxEpoch)
		l, err := s.list(ctx, epochKey(s.name, probe))
		if err != nil {
			return 0, 0, false, err
		}
		if !l.truncated {
			return lo, probe, len(l.epochs) > 0, nil // nothing after probe
		}
		if probe == MaxEpoch {
			return lo, hi, false, nil
		}
		lo = probe
		if n, ok := l.newest(); ok {
			lo = n.epoch
		}
	}
}

// bisect narrows (lo, hi] down to at most a page; done when a LIST saw the
// newest epoch.
func (s *newestSearch) bisect(ctx context.Context, lo, hi uint64) (uint64, bool, error) {
	for hi-lo > pageSize {
		mid := lo + (hi-lo)/2
		l, err := s.list(ctx, epochKey(s.name, mid))
		if err != nil {
			return 0, false, err
		}
		switch {
		case len(l.epochs) == 0 && !l.truncated:
			hi = mid
		case !l.truncated:
			return lo, true, nil
		default:
			lo = mid
			if n, ok := l.newest(); ok {
				lo = n.epoch
			}
		}
	}
	return lo, false, nil
}

// page lists page after page from epoch lo to the end of the keys.
func (s *newestSearch) page(ctx context.Context, lo uint64) error {
	return s.each(ctx, epochKey(s.name, lo), func(l *listed) (bool, error) {
		s.keep(l)
		return false, nil
	})
}
