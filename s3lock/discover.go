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
	best := newest
	consider := func(l *listed) {
		if n, ok := l.newest(); ok && n.epoch > best.epoch {
			best, found = n, true
		}
	}
	// Gallop: probe ever further until a probe sees the end of the keys.
	lo, step := best.epoch, uint64(pageSize)
	hi := MaxEpoch
	for {
		probe := min(lo+step, MaxEpoch)
		l, err := c.listEpochs(ctx, name, Key(name, probe))
		if err != nil {
			return listedEpoch{}, false, nil, err
		}
		consider(l)
		if !l.truncated {
			if len(l.epochs) > 0 {
				return best, found, first, nil
			}
			hi = probe // nothing after probe
			break
		}
		if probe == MaxEpoch {
			break
		}
		if n, ok := l.newest(); ok {
			lo = n.epoch
		} else {
			lo = probe
		}
		step *= 2
	}
	// Bisect (lo, hi]: the newest epoch is in it.
	for hi-lo > pageSize {
		mid := lo + (hi-lo)/2
		l, err := c.listEpochs(ctx, name, Key(name, mid))
		if err != nil {
			return listedEpoch{}, false, nil, err
		}
		consider(l)
		switch {
		case len(l.epochs) == 0 && !l.truncated:
			hi = mid
		case !l.truncated:
			return best, found, first, nil
		default:
			if n, ok := l.newest(); ok {
				lo = n.epoch
			} else {
				lo = mid
			}
		}
	}
	// Page through what is left.
	after := Key(name, lo)
	for {
		l, err := c.listEpochs(ctx, name, after)
		if err != nil {
			return listedEpoch{}, false, nil, err
		}
		consider(l)
		if !l.truncated {
			return best, found, first, nil
		}
		after = l.lastKey
	}
}
