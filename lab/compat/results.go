package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// Results is what the runs measured, one entry per store, as committed in
// compat/results.json: `make compat` rewrites the probes, `make test-stores`
// the suite results, and the page is rendered from it.
type Results struct {
	Stores []StoreResult `json:"stores"`
}

// StoreResult is one store's measurements.
type StoreResult struct {
	Store   string `json:"store"`
	Version string `json:"version"`
	Probe   *Probe `json:"probe,omitempty"`
	Suite   *Suite `json:"suite,omitempty"`
}

// Probe is what `make compat` measured on a fresh store.
type Probe struct {
	Date string `json:"date"`
	// Verify is "ok" when the SDK's storecheck.Verify passed, else its error.
	Verify    string    `json:"verify"`
	CLIVerify CLIResult `json:"cli_verify"`
	Writers   int       `json:"writers"`
	Rounds    int       `json:"rounds"`
	Races     []Race    `json:"races"`
	Latency   Latency   `json:"latency"`
	Quirks    []Quirk   `json:"quirks"`
}

// CLIResult is how `s3lock verify` ended.
type CLIResult struct {
	Exit int `json:"exit"`
	// Line is the message it printed on stderr ("" when it printed none).
	Line string `json:"line,omitempty"`
}

// Race counts, over Rounds rounds of Writers concurrent requests, how the
// store settled them.
type Race struct {
	Name string `json:"name"`
	// OneWinner counts the rounds in which exactly one request succeeded,
	// as a store that enforces the condition must settle every round.
	OneWinner int `json:"one_winner"`
	// Several counts the rounds in which more than one succeeded (for the
	// DELETE-vs-PUT race: the DELETE and a PUT both did).
	Several int `json:"several"`
	// None counts the rounds in which no request succeeded.
	None int `json:"none"`
	// Errors counts requests that failed otherwise than by the condition
	// (not 412 or 409).
	Errors int `json:"errors"`
}

// Latency holds median request latencies on loopback, in milliseconds.
type Latency struct {
	Samples  int     `json:"samples"`
	CreateMs float64 `json:"create_ms"`
	CASMs    float64 `json:"cas_ms"`
	GetMs    float64 `json:"get_ms"`
}

// Quirk is one behaviour checked on the store, and its answer.
type Quirk struct {
	Check  string `json:"check"`
	Answer string `json:"answer"`
	// AsAWS is true when the answer is what AWS S3 documents.
	AsAWS bool `json:"as_aws"`
}

// Suite is what `make test-stores` found on a store.
type Suite struct {
	Date   string     `json:"date"`
	Passed bool       `json:"passed"`
	Runs   []SuiteRun `json:"runs"`
	// Leftovers are the keys the runs left outside their namespaces.
	Leftovers []string  `json:"leftovers"`
	CLIVerify CLIResult `json:"cli_verify"`
	Bench     []Bench   `json:"bench"`
}

// SuiteRun is one `go test -race ./s3lock/` on the shared bucket.
type SuiteRun struct {
	Passed      bool     `json:"passed"`
	Tests       int      `json:"tests"`
	Skipped     int      `json:"skipped"`
	FailedTests []string `json:"failed_tests,omitempty"`
	Seconds     int      `json:"seconds"`
	// Inside is how many keys the bucket held under the test prefix after
	// the run.
	Inside int `json:"inside"`
}

// Bench is one benchmark's metrics (unit → value).
type Bench struct {
	Name    string             `json:"name"`
	Metrics map[string]float64 `json:"metrics"`
}

// loadResults reads path; a missing file is an empty Results.
func loadResults(path string) (Results, error) {
	var r Results
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// save writes r to path, stores in their fixed order.
func (r Results) save(path string) error {
	slices.SortStableFunc(r.Stores, func(a, b StoreResult) int { return storeOrder(a.Store) - storeOrder(b.Store) })
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// store returns the entry of kind, adding one if there is none.
func (r *Results) store(kind, version string) *StoreResult {
	for i := range r.Stores {
		if r.Stores[i].Store == kind {
			r.Stores[i].Version = version
			return &r.Stores[i]
		}
	}
	r.Stores = append(r.Stores, StoreResult{Store: kind, Version: version})
	return &r.Stores[len(r.Stores)-1]
}

// updateResults applies change to the results in path and writes them back.
func updateResults(path string, change func(*Results)) error {
	r, err := loadResults(path)
	if err != nil {
		return err
	}
	change(&r)
	return r.save(path)
}
