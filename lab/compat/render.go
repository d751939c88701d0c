package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/template"
)

// Known is compat/known.json: what is known about stores that cannot run
// here, with sources.
type Known struct {
	Stores []KnownStore `json:"stores"`
}

// KnownStore is one store that cannot run here.
type KnownStore struct {
	Name string `json:"name"`
	// Status is one line: can s3lock run on it.
	Status string `json:"status"`
	// Details say what is known and what it means for s3lock.
	Details []string `json:"details"`
	Sources []Source `json:"sources"`
}

// Source is where a fact comes from.
type Source struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

func loadKnown(path string) (Known, error) {
	var k Known
	data, err := os.ReadFile(path)
	if err != nil {
		return k, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k); err != nil {
		return k, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range k.Stores {
		if s.Name == "" || s.Status == "" || len(s.Sources) == 0 {
			return k, fmt.Errorf("%s: every store needs a name, a status and at least one source (%q has not)", path, s.Name)
		}
	}
	return k, nil
}

// renderFiles renders the page from the committed inputs and writes it.
func renderFiles() error {
	page, err := renderPage(resultsFile, knownFile)
	if err != nil {
		return err
	}
	if err := os.WriteFile(pageFile, []byte(page), 0o644); err != nil {
		return err
	}
	fmt.Println("wrote", pageFile)
	return nil
}

// renderPage renders the page from the results and known-stores files.
func renderPage(results, known string) (string, error) {
	r, err := loadResults(results)
	if err != nil {
		return "", err
	}
	k, err := loadKnown(known)
	if err != nil {
		return "", err
	}
	return render(r, k)
}

//go:embed page.md.tmpl
var pageTemplate string

// awsAnswers is what AWS S3 documents for each quirk check (the page's
// reference column).
var awsAnswers = map[string]string{
	"PUT with If-Match on a missing key":                             "404 NoSuchKey",
	"PUT with If-None-Match: <the current ETag>":                     "501 NotImplemented (only `*` is accepted)",
	"DELETE with If-Match on a stale ETag":                           "412 PreconditionFailed, object kept",
	"two PUTs of the same body":                                      "same ETag (the body's MD5)",
	"keys a/b and a/b/c side by side":                                "both kept",
	"a LIST of the prefix a/b/ while an object a/b exists":           "lists a/b/c",
	"a request signed with a wrong secret key":                       "rejected: 403 SignatureDoesNotMatch",
	"a delimited LIST after the only key under a prefix was deleted": "lists nothing",
}

// render renders the page. It depends on nothing but r and k.
func render(r Results, k Known) (string, error) {
	stores := slices.Clone(r.Stores)
	slices.SortStableFunc(stores, func(a, b StoreResult) int { return storeOrder(a.Store) - storeOrder(b.Store) })
	var checks []string
	for _, s := range stores {
		if s.Probe == nil {
			continue
		}
		for _, q := range s.Probe.Quirks {
			if !slices.Contains(checks, q.Check) {
				checks = append(checks, q.Check)
			}
		}
	}
	funcs := template.FuncMap{
		"ms":     func(v float64) string { return fmt.Sprintf("%.1f ms", v) },
		"code":   func(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" },
		"cell":   cell,
		"verify": verifyCell,
		"cli":    cliCell,
		"suite":  suiteCell,
		"race":   raceCell,
		"aws":    func(check string) string { return awsAnswers[check] },
		"quirk":  quirkCell,
		"metric": metricCell,
		"sub":    func(a, b int) int { return a - b },
		"hasBench": func(stores []StoreResult) bool {
			return slices.ContainsFunc(stores, func(s StoreResult) bool { return s.Suite != nil && len(s.Suite.Bench) > 0 })
		},
	}
	t, err := template.New("page").Funcs(funcs).Parse(pageTemplate)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = t.Execute(&buf, map[string]any{"Stores": stores, "Checks": checks, "Known": k.Stores, "Probe": firstProbe(stores)})
	return buf.String(), err
}

// firstProbe returns a probe whose parameters (writers, rounds, samples)
// head the race and latency tables; every probe of one make compat run
// shares them.
func firstProbe(stores []StoreResult) *Probe {
	for _, s := range stores {
		if s.Probe != nil {
			return s.Probe
		}
	}
	return nil
}

// cell makes text safe inside a Markdown table cell: one line, no column
// break, no HTML tag (a "<the current ETag>" would vanish).
func cell(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

func verifyCell(p *Probe) string {
	if p == nil {
		return "not probed"
	}
	if p.Verify == "ok" {
		return "passes"
	}
	return "**refuses it**: " + cell(p.Verify)
}

func cliCell(c CLIResult) string {
	if c.Line == "" {
		return fmt.Sprintf("exit %d", c.Exit)
	}
	line := strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(c.Line), "\n", " "), "`", "'")
	return fmt.Sprintf("exit %d: `%s`", c.Exit, strings.ReplaceAll(line, "|", `\|`))
}

func suiteCell(s StoreResult) string {
	if s.Suite == nil {
		if s.Probe != nil && s.Probe.Verify != "ok" {
			return "not run: s3lock refuses this store"
		}
		return "not run yet (`make test-stores`)"
	}
	var runs []string
	for _, r := range s.Suite.Runs {
		state := "passed"
		if !r.Passed {
			state = "**failed**: " + cell(strings.Join(r.FailedTests, ", "))
		}
		runs = append(runs, fmt.Sprintf("%s (%d tests, %d skipped, %ds)", state, r.Tests, r.Skipped, r.Seconds))
	}
	left := "nothing left outside `s3lock-test/`"
	if n := len(s.Suite.Leftovers); n > 0 {
		left = fmt.Sprintf("**%d keys left outside `s3lock-test/`**: %s", n, cell(strings.Join(s.Suite.Leftovers, ", ")))
	}
	verdict := "**failed**"
	if s.Suite.Passed {
		verdict = "passed"
	}
	return fmt.Sprintf("%s on %s: %d runs on one bucket: %s; %s; `s3lock verify` %s",
		verdict, s.Suite.Date, len(s.Suite.Runs), strings.Join(runs, "; "), left, cliCell(s.Suite.CLIVerify))
}

func raceCell(p *Probe, i int) string {
	if p == nil || i >= len(p.Races) {
		return "not probed"
	}
	r := p.Races[i]
	s := fmt.Sprintf("one winner in %d of %d", r.OneWinner, p.Rounds)
	if r.Several > 0 {
		s += fmt.Sprintf("; **several won in %d**", r.Several)
	}
	if r.None > 0 {
		s += fmt.Sprintf("; none in %d", r.None)
	}
	if r.Errors > 0 {
		s += fmt.Sprintf("; %d other errors", r.Errors)
	}
	return s
}

func quirkCell(p *Probe, check string) string {
	if p == nil {
		return "not probed"
	}
	for _, q := range p.Quirks {
		if q.Check == check {
			if q.AsAWS {
				return cell(q.Answer)
			}
			return "**" + cell(q.Answer) + "**"
		}
	}
	return "not probed"
}

// metricCell returns a benchmark's metric, or "–".
func metricCell(s StoreResult, bench, unit string) string {
	if s.Suite == nil {
		return "–"
	}
	for _, b := range s.Suite.Bench {
		if v, ok := b.Metrics[unit]; ok && b.Name == bench {
			return fmt.Sprintf("%.4g", v)
		}
	}
	return "–"
}
