// Package transfer times requests that carry a body of some size: the one
// home of the rule the SDK's fence.Put and the Terraform state store's GET
// and PUT share.
package transfer

import "time"

// RequestTimeout is how long one request to the store may take when its
// body is small (a lease object of a few hundred bytes): the SDK's default
// request timeout, which the provider and the CLI keep.
const RequestTimeout = 30 * time.Second

// MinRate is the slowest steady transfer a request's timeout allows for:
// 128 KiB/s, a 1 Mbit/s link, far below what one connection to S3 gets. A
// body of megabytes (a Terraform state) on a slow link would never fit in
// RequestTimeout; a timeout that grows with the body does, and a store that
// stalls still fails the request, only later by the body's size. It scales
// rather than being a setting: a store that stalls on a small body fails as
// soon as before, and there is no number for users to get right.
const MinRate = 128 << 10 // bytes per second

// Allowance is how much longer than its request timeout a request that
// carries n bytes of body is given: n at MinRate (8 s per MiB); 0 for
// n <= 0.
func Allowance(n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	// In two parts, so that no size overflows the nanoseconds.
	return time.Duration(n/MinRate)*time.Second + time.Duration(n%MinRate)*time.Second/MinRate
}

// Timeout is RequestTimeout plus the Allowance of n bytes.
func Timeout(n int64) time.Duration { return RequestTimeout + Allowance(n) }
