package tfharness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// QueryResult is one resource that `terraform query -json` found: the
// list_resource_found message of a list block (Terraform 1.14 and later).
type QueryResult struct {
	// Address is the list block's address, e.g. list.s3lock_lease.held.
	Address      string `json:"address"`
	DisplayName  string `json:"display_name"`
	ResourceType string `json:"resource_type"`
	// Identity is the resource's identity; numbers are json.Number.
	Identity map[string]any `json:"identity"`
	// ResourceObject is the resource's state, with include_resource = true
	// only; numbers are json.Number.
	ResourceObject map[string]any `json:"resource_object"`
}

// Diagnostic is a diagnostic that a CLI run with -json printed.
type Diagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail"`
}

// String writes the diagnostic as the CLI shows it: severity, summary and
// detail.
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
}

// QueryOutput is what a `query -json` run printed: the resources found, in
// the order the CLI printed them, and the diagnostics.
type QueryOutput struct {
	Results     []QueryResult
	Diagnostics []Diagnostic
}

// Query runs `query -json` in dir with args (such as
// -generate-config-out=FILE) and returns the resources it found and the
// diagnostics it printed. If the CLI fails, the error includes its
// diagnostics; the output is returned all the same.
func (h *Harness) Query(ctx context.Context, dir string, args ...string) (QueryOutput, error) {
	var stdout, stderr bytes.Buffer
	cmd := h.Command(ctx, dir, append([]string{"query", "-json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out, err := ParseQuery(stdout.Bytes())
	if err != nil {
		return out, fmt.Errorf("%s query in %s: %w\n%s%s", filepath.Base(h.Terraform), dir, err, stdout.Bytes(), stderr.Bytes())
	}
	if runErr != nil {
		var diags []string
		for _, d := range out.Diagnostics {
			diags = append(diags, d.String())
		}
		return out, fmt.Errorf("%s query in %s: %w\n%s%s", filepath.Base(h.Terraform), dir, runErr,
			strings.Join(diags, "\n"), stderr.Bytes())
	}
	return out, nil
}

// ParseQuery reads the JSON lines that `query -json` prints (one message a
// line, as in Terraform's machine-readable UI) and returns the resources
// found and the diagnostics; it ignores the other messages.
func ParseQuery(output []byte) (QueryOutput, error) {
	var out QueryOutput
	sc := bufio.NewScanner(bytes.NewReader(output))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var msg struct {
			Type       string       `json:"type"`
			Found      *QueryResult `json:"list_resource_found"`
			Diagnostic *Diagnostic  `json:"diagnostic"`
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&msg); err != nil {
			return out, fmt.Errorf("tfharness: a line of query -json is not a JSON message: %w: %s", err, line)
		}
		switch {
		case msg.Type == "list_resource_found" && msg.Found != nil:
			out.Results = append(out.Results, *msg.Found)
		case msg.Type == "diagnostic" && msg.Diagnostic != nil:
			out.Diagnostics = append(out.Diagnostics, *msg.Diagnostic)
		}
	}
	return out, sc.Err()
}

// Invoke runs the action at address (action.TYPE.NAME) in dir with
// `apply -invoke` and returns the CLI's combined output, which shows the
// action's progress messages (Terraform 1.14 and later).
func (h *Harness) Invoke(ctx context.Context, dir, address string, args ...string) (string, error) {
	return h.Run(ctx, dir, append([]string{"apply", "-invoke=" + address, "-auto-approve", "-input=false", "-no-color"}, args...)...)
}
