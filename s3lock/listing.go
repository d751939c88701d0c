package s3lock

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// This file holds the rule every paged listing of the package keeps
// (PROTOCOL.md §8): a listing makes progress or fails. A store that ignores
// StartAfter, repeats a continuation token or says every page is truncated
// would otherwise keep a search for a lock's newest epoch, or a listing of
// its line, going forever. Each such store fails the listing with an error
// that matches ErrUnorderedListing and says what the store did.

// listingError is the error of a listing the store does not let move on: it
// matches ErrUnorderedListing and names the bucket, the prefix listed and
// what the store did.
func (c *Client) listingError(prefix, did string) error {
	return fmt.Errorf("%w: s3://%s/%s: %s, so s3lock cannot list a lock's keys to their end on this store; "+
		"check the store with `s3lock verify` (storecheck.Verify), and use one that passes it",
		ErrUnorderedListing, c.bucket, prefix, did)
}

// repeatedToken is the error of a listing whose store answered a
// continuation token it had answered before in it.
func (c *Client) repeatedToken(prefix, token string) error {
	return c.listingError(prefix, fmt.Sprintf("the store answered continuation token %s again in one listing: "+
		"it repeats its continuation token, and would list the same pages forever", clip(token)))
}

// stalledListing is the error of a listing whose pages said, maxListStalls
// times in a row and more, that more keys follow, and listed none it had
// not listed before; token is the continuation token each of them carried,
// if they all carried the same.
func (c *Client) stalledListing(prefix string, pages int, token string) error {
	did := "it says every page is truncated"
	if token != "" {
		did += ", and repeats its continuation token " + clip(token)
	}
	return c.listingError(prefix, fmt.Sprintf("the store answered %d pages in a row that say more keys follow "+
		"and list none not listed before (%s)", pages, did))
}

// checkStartAfter holds a page listed after startAfter to what StartAfter
// means: it lists only keys and common prefixes after startAfter (a common
// prefix that startAfter is inside of included, as S3 rolls such keys up).
// A store that ignores StartAfter would have every search for a lock's
// newest epoch start over at its first page.
func (c *Client) checkStartAfter(prefix, startAfter, token string, out *s3.ListObjectsV2Output) error {
	if startAfter == "" {
		return nil
	}
	listed := ""
	for _, o := range out.Contents {
		if k := aws.ToString(o.Key); k <= startAfter {
			listed = k
			break
		}
	}
	for _, cp := range out.CommonPrefixes {
		if p := aws.ToString(cp.Prefix); listed == "" && p <= startAfter && !strings.HasPrefix(startAfter, p) {
			listed = p
		}
	}
	switch {
	case listed == "":
		return nil
	case token != "":
		return c.listingError(prefix, fmt.Sprintf("asked to go on with continuation token %s from a listing of the keys after %s, "+
			"the store listed %s: it starts its listing over on a continuation token", clip(token), clip(startAfter), clip(listed)))
	}
	return c.listingError(prefix, fmt.Sprintf("asked for the keys after %s (StartAfter), the store listed %s: "+
		"it does not honour StartAfter", clip(startAfter), clip(listed)))
}

// pages lists in page by page with continuation tokens, calling more with
// each page until it returns false or the listing ends, and holds the store
// to the rule (pageProgress). prefix names the listing in errors.
func (c *Client) pages(ctx context.Context, prefix string, in *s3.ListObjectsV2Input, more func(*s3.ListObjectsV2Output) bool) error {
	p := pageProgress{c: c, prefix: prefix, ordered: !c.directory, tokens: map[string]bool{}}
	if !p.ordered {
		p.seen = map[string]bool{}
	}
	for {
		out, err := c.list(ctx, prefix, in)
		if err != nil {
			return err
		}
		if !more(out) {
			return nil
		}
		on, err := p.next(in, out)
		if err != nil || !on {
			return err
		}
		next := *in
		next.ContinuationToken = out.NextContinuationToken
		in = &next
	}
}

// pageProgress judges the pages of one listing paged with continuation
// tokens. A page that says more keys follow must carry a continuation token
// not seen before in the listing (a token seen again would list the same
// pages again, forever), and must list a key or common prefix not listed
// before: on a general purpose bucket, whose pages follow the key order,
// only keys after every key of the earlier pages (a key at or before them is
// a listing that went back); on a directory bucket, which lists in no order,
// any key not listed yet. A page with nothing new (a store may answer a
// truncated page that is empty) is a stall; more than maxListStalls stalls
// in a row fail the listing.
type pageProgress struct {
	c        *Client
	prefix   string
	ordered  bool
	greatest string          // ordered: the greatest key or prefix listed yet
	seen     map[string]bool // unordered: every key and prefix listed yet
	tokens   map[string]bool // every continuation token answered yet
	stalls   int
}

// next judges out, the answer to in, and says whether to list on with its
// continuation token.
func (p *pageProgress) next(in *s3.ListObjectsV2Input, out *s3.ListObjectsV2Output) (bool, error) {
	if !aws.ToBool(out.IsTruncated) {
		return false, nil
	}
	token := aws.ToString(out.NextContinuationToken)
	switch {
	case token == "" && p.ordered:
		return false, nil // read as the end, as always on a general purpose bucket
	case token == "":
		return false, p.c.listingError(p.prefix, "the store said more keys follow and gave no continuation token to list them with")
	case token == aws.ToString(in.ContinuationToken) || p.tokens[token]:
		return false, p.c.repeatedToken(p.prefix, token)
	}
	p.tokens[token] = true
	moved, err := p.entries(out)
	if err != nil {
		return false, err
	}
	if moved {
		p.stalls = 0
	} else if p.stalls++; p.stalls > maxListStalls {
		return false, p.c.stalledListing(p.prefix, p.stalls, "")
	}
	return true, nil
}

// entries notes the keys and common prefixes of a page, and says whether it
// listed one not listed before.
func (p *pageProgress) entries(out *s3.ListObjectsV2Output) (bool, error) {
	names := make([]string, 0, len(out.Contents)+len(out.CommonPrefixes))
	for _, o := range out.Contents {
		names = append(names, aws.ToString(o.Key))
	}
	for _, cp := range out.CommonPrefixes {
		names = append(names, aws.ToString(cp.Prefix))
	}
	moved := false
	if !p.ordered {
		for _, n := range names {
			if !p.seen[n] {
				p.seen[n], moved = true, true
			}
		}
		return moved, nil
	}
	greatest := p.greatest
	for _, n := range names {
		if p.greatest != "" && n <= p.greatest {
			return false, p.c.listingError(p.prefix, fmt.Sprintf("a page listed %s after an earlier page that went up to %s: "+
				"the store started its listing over, or lists out of key order", clip(n), clip(p.greatest)))
		}
		greatest, moved = max(greatest, n), true
	}
	p.greatest = greatest
	return moved, nil
}

// epochLister lists a lock's epochs a page at a time with StartAfter
// (listEpochs), and holds the store to the rule: every page lists only keys
// after its StartAfter (checkStartAfter, in listEpochs), and a page that
// says more keys follow but lists nothing (S3 may answer such pages, over
// many delete markers in a versioned bucket) is gone on from with its
// continuation token, which must be new: more than maxListStalls such
// pages in a row fail the listing.
type epochLister struct {
	c    *Client
	name string
}

// list lists the first page of the lock's epochs after the key after that
// lists something, or the last one.
func (e *epochLister) list(ctx context.Context, after string) (*listed, error) {
	prefix := epochPrefix(e.name)
	tokens := map[string]bool{}
	token := ""
	for {
		l, err := e.c.listEpochPage(ctx, e.name, after, token)
		switch {
		case err != nil:
			return nil, err
		case !l.truncated || l.lastKey > after:
			return l, nil
		case l.next == "":
			l.truncated = false // read as the end, as always on a general purpose bucket
			return l, nil
		case tokens[l.next]:
			return nil, e.c.repeatedToken(prefix, l.next)
		case len(tokens) >= maxListStalls:
			return nil, e.c.stalledListing(prefix, len(tokens)+1, "")
		}
		tokens[l.next] = true
		token = l.next
	}
}

// each calls fn with every page from the one after the key after to the end
// of the lock's epochs, until fn says stop.
func (e *epochLister) each(ctx context.Context, after string, fn func(*listed) (stop bool, err error)) error {
	for {
		l, err := e.list(ctx, after)
		if err != nil {
			return err
		}
		if stop, err := fn(l); stop || err != nil {
			return err
		}
		if !l.truncated {
			return nil
		}
		after = l.lastKey // list only returns a truncated page that listed something
	}
}

// clip quotes a key or token from the store for a message, cut to a length
// that fits one.
func clip(s string) string {
	const most = 120
	if len(s) > most {
		return fmt.Sprintf("%q…", s[:most])
	}
	return fmt.Sprintf("%q", s)
}
