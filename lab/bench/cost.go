package main

import (
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// prices are S3 request prices in USD per 1,000 requests.
type prices struct {
	write float64 // PUT, COPY, POST, LIST
	read  float64 // GET, SELECT and all other requests
}

// listPrices are AWS S3 Standard's list prices (us-east-1). DELETE requests
// are free.
var listPrices = prices{write: 0.005, read: 0.0004}

// cost returns what the requests c cost at p, in USD.
func (p prices) cost(c counts) float64 {
	return (c.writes*p.write + c.reads*p.read) / 1000
}

// costRow is one line of the cost table: what a unit of use costs, from
// which measured requests.
type costRow struct {
	what     string
	requests counts // per unit
	formula  string // how requests per unit follow from the measurements
}

// Assumptions of the cost table that the run does not measure.
const (
	// costLease is the lease priced: s3lock's default, renewed every third.
	costLease = s3lock.DefaultLeaseDuration
	// tfMaxRetry is the longest wait between Terraform's lock attempts
	// (statemgr.LockWithContext doubles from 1 s up to 16 s).
	tfMaxRetry = 16 * time.Second
)

// costRows derives the cost table from the run's request counts.
func costRows(res *results) []costRow {
	renewalsPerHour := float64(time.Hour / (costLease / 3))
	rows := []costRow{
		{"s3lock: one lease-hour (60 s lease, renewed every 20 s)", res.renewal.scale(renewalsPerHour),
			"180 renewals × requests per renewal (measured on the crashed holder)"},
		{"s3lock: one waiter-hour (polling every 200 ms, up to 10 % early)", waiterPolls(res.release).scale(time.Hour.Seconds()),
			"3,600 s × the waiter's measured conditional GETs per second (handoffs after release; its attempts' LISTs count with the acquisition)"},
		{"s3lock: one acquisition + release of a free lock", res.uncontended,
			"measured, averaged over 20 (LIST, GET, PUT; PUT)"},
	}
	if n := res.contended.total(); n > 0 {
		rows = append(rows, costRow{"s3lock: one acquisition + release on a contended lock", res.contended.requests.per(float64(n)),
			"all requests of the contended-lock run ÷ its acquisitions (waiters' polls and history cleanup included)"})
	}
	if res.many.locks > 0 {
		rows = append(rows, costRow{"s3lock: one List of " + thousands(res.many.locks) + " locks", res.many.listRequests,
			"measured: LIST pages plus one GET per lock"})
	}
	if len(bySystem(res.release, sysTerraform)) > 0 {
		lock, attempt := tfLockCounts(res)
		rows = append(rows,
			costRow{"Terraform native lock: one lease-hour", counts{},
				"nothing: the lock file is never renewed (and so never expires)"},
			costRow{"Terraform native lock: one waiter-hour (attempt every 16 s)", attempt.scale(float64(time.Hour / tfMaxRetry)),
				"225 attempts (the 16 s retry cap) × requests per attempt (measured: PUT 412, GET)"},
			costRow{"Terraform native lock: one lock + unlock", lock,
				"measured on the .tflock object: PUT; GET, DELETE"})
	}
	return rows
}

// waiterPolls returns an s3lock waiter's GETs per second over the
// handoffs hs: what a waiter that keeps waiting spends. The LISTs of its
// attempts (one on arrival, one when it sees the release) are part of the
// acquisition; over a short wait they would inflate an hourly rate.
func waiterPolls(hs []handoff) counts {
	var reads float64
	var waited time.Duration
	for _, h := range bySystem(hs, sysS3lock) {
		reads += h.wait.reads
		waited += h.waited
	}
	return counts{reads: reads}.per(waited.Seconds())
}

// tfLockCounts returns, averaged over the terraform runs after a release,
// the holder's requests on the lock file (lock and unlock) and the waiter's
// per failed attempt.
func tfLockCounts(res *results) (lock, attempt counts) {
	var l, a counts
	var runs, attempts float64
	for _, h := range bySystem(res.release, sysTerraform) {
		l = add(l, h.lockCounts)
		a = add(a, h.wait)
		runs++
		attempts += float64(h.attempts)
	}
	return l.per(runs), a.per(attempts)
}

func add(a, b counts) counts {
	return counts{writes: a.writes + b.writes, reads: a.reads + b.reads, free: a.free + b.free}
}

// bySystem returns the handoffs of system.
func bySystem(hs []handoff, system string) []handoff {
	var out []handoff
	for _, h := range hs {
		if h.system == system {
			out = append(out, h)
		}
	}
	return out
}
