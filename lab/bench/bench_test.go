package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// at returns the instant ms milliseconds after a fixed origin.
func at(ms int) time.Time {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(ms) * time.Millisecond)
}

func ev(sent, done int, op, key string, status int) event {
	return event{sent: at(sent), done: at(done), op: op, key: key, status: status}
}

func TestAnalyze(t *testing.T) {
	const lock = "bench/terraform.tfstate.tflock"
	tests := []struct {
		name           string
		ops            lockOps
		holder, waiter []event
		crashed        time.Time
		gaveUp         time.Time
		want           handoff
	}{{
		name: "s3lock release",
		ops:  s3lockOps,
		holder: []event{
			ev(0, 1, "ListObjectsV2", "l/lock-", 200),
			ev(1, 2, "PutObject", "l/lock-0000000001.json", 200),       // acquired
			ev(2000, 2002, "PutObject", "l/lock-0000000001.json", 200), // released
		},
		waiter: []event{
			ev(10, 11, "ListObjectsV2", "l/lock-", 200),
			ev(11, 12, "GetObject", "l/lock-0000000001.json", 200),
			ev(200, 201, "GetObject", "l/lock-0000000001.json", 304),
			ev(2100, 2101, "GetObject", "l/lock-0000000001.json", 200),
			ev(2101, 2102, "ListObjectsV2", "l/lock-", 200),
			ev(2102, 2104, "PutObject", "l/lock-0000000002.json", 200), // acquired
			ev(2200, 2201, "PutObject", "l/lock-0000000002.json", 200), // its release: not counted
		},
		want: handoff{held: 2000 * time.Millisecond, gap: 102 * time.Millisecond, acquired: true,
			waited: 2094 * time.Millisecond, requests: 5, wait: counts{writes: 2, reads: 3}},
	}, {
		name:   "terraform crash: the waiter gives up",
		ops:    tfOps,
		holder: []event{ev(0, 5, "PutObject", lock, 200), ev(10, 20, "GetObject", "bench/terraform.tfstate", 200)},
		waiter: []event{
			ev(100, 101, "HeadObject", "bench/terraform.tfstate", 200), // before its first attempt
			ev(500, 502, "PutObject", lock, 412),
			ev(502, 503, "GetObject", lock, 200),
			ev(1503, 1504, "PutObject", lock, 412),
			ev(1504, 1505, "GetObject", lock, 200),
		},
		crashed: at(1000),
		gaveUp:  at(3000),
		want: handoff{held: 995 * time.Millisecond, waited: 2500 * time.Millisecond, gaveUpAfter: 2 * time.Second,
			requests: 4, wait: counts{writes: 2, reads: 2}, attempts: 2},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := analyze(tt.ops, tt.holder, tt.waiter, tt.crashed, tt.gaveUp)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("analyze:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestAnalyze_WaiterStartedTooLate(t *testing.T) {
	holder := []event{ev(0, 1, "PutObject", "k", 200), ev(100, 101, "PutObject", "k", 200)}
	waiter := []event{ev(200, 201, "ListObjectsV2", "k", 200), ev(201, 202, "PutObject", "k2", 200)}
	if _, err := analyze(s3lockOps, holder, waiter, time.Time{}, time.Time{}); err == nil {
		t.Error("analyze accepted a waiter that made its first attempt after the release")
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 10; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tt := range []struct {
		p    int
		want time.Duration
	}{{50, 5 * time.Millisecond}, {90, 9 * time.Millisecond}, {99, 10 * time.Millisecond}} {
		if got := percentile(ds, tt.p); got != tt.want {
			t.Errorf("percentile(1..10 ms, %d) = %s, want %s", tt.p, got, tt.want)
		}
	}
	if got := median(ds); got != 5500*time.Microsecond {
		t.Errorf("median(1..10 ms) = %s, want 5.5ms", got)
	}
}

func TestCost(t *testing.T) {
	// One acquisition and release of a free lock: LIST, GET, PUT; PUT.
	got := listPrices.cost(counts{writes: 3, reads: 1})
	if want := 15.4e-6; math.Abs(got-want) > 1e-12 {
		t.Errorf("cost = %g, want %g", got, want)
	}
	for v, want := range map[float64]string{0: "$0", 0.0009: "$0.00090", 0.0072: "$0.0072", 0.0000154: "$0.000015", 12.345: "$12.35"} {
		if got := usd(v); got != want {
			t.Errorf("usd(%g) = %q, want %q", v, got, want)
		}
	}
}

func TestDrawHandoffChart(t *testing.T) {
	holds := []time.Duration{2 * time.Second, 20 * time.Second}
	hs := []handoff{
		{system: sysS3lock, hold: holds[0], gap: 110 * time.Millisecond},
		{system: sysS3lock, hold: holds[1], gap: 90 * time.Millisecond},
		{system: sysTerraform, hold: holds[0], gap: time.Second},
		{system: sysTerraform, hold: holds[1], gap: 10 * time.Second},
	}
	path := filepath.Join(t.TempDir(), "chart.png")
	if err := drawHandoffChart(path, holds, hs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("%s is not a PNG", path)
	}
}
