package s3test

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
)

// UnorderedListings is an http.RoundTripper that makes a store list keys
// out of order, as S3 directory buckets do ("ListObjectsV2 does not return
// objects in lexicographical order"): it reverses the keys of every
// ListObjectsV2 page. Each page still holds the keys the store chose for
// it; only their order within the page changes. (AWS documents no order at
// all; reversing is the order a test can rely on to be wrong.)
type UnorderedListings struct {
	Next http.RoundTripper
}

// Wrap makes u reorder the listings that pass through next.
func (u *UnorderedListings) Wrap(next http.RoundTripper) http.RoundTripper {
	u.Next = next
	return u
}

// contentsElem is one key of a ListObjectsV2 answer.
var contentsElem = regexp.MustCompile(`(?s)<Contents>.*?</Contents>`)

// RoundTrip implements http.RoundTripper.
func (u *UnorderedListings) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.Next.RoundTrip(req)
	if err != nil || Operation(req) != "ListObjectsV2" || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	spans := contentsElem.FindAllIndex(body, -1)
	elems := make([][]byte, len(spans))
	for i, s := range spans {
		elems[i] = body[s[0]:s[1]]
	}
	slices.Reverse(elems)
	var out bytes.Buffer
	last := 0
	for i, s := range spans {
		out.Write(body[last:s[0]])
		out.Write(elems[i])
		last = s[1]
	}
	out.Write(body[last:])
	resp.Body = io.NopCloser(&out)
	resp.ContentLength = int64(out.Len())
	resp.Header.Set("Content-Length", strconv.Itoa(out.Len()))
	return resp, nil
}
