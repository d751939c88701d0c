package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// waiterStatus is one ordered waiter in the line of a lock, in status's
// JSON output.
type waiterStatus struct {
	// Position is the waiter's place in the line: 1 is served next.
	Position int    `json:"position"`
	Holder   string `json:"holder,omitempty"`
	// Order is "fifo" or "newest" (--order).
	Order string `json:"order"`
	// JoinedAt is when it joined the line (the waiter's clock).
	JoinedAt time.Time         `json:"joined_at,omitzero"`
	Ticket   uint64            `json:"ticket"`
	Key      string            `json:"key"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Error    string            `json:"error,omitempty"`
}

func waitersOf(line []s3lock.Waiter) []waiterStatus {
	out := make([]waiterStatus, len(line))
	for i, w := range line {
		out[i] = waiterStatus{
			Position: w.Position, Holder: w.Holder, Order: string(w.Order), JoinedAt: w.JoinedAt.UTC(),
			Ticket: w.Ticket, Key: w.Key, Metadata: w.Metadata,
		}
		if w.Err != nil {
			out[i].Error = oneLine(w.Err.Error())
		}
	}
	return out
}

// printLine prints the line of a lock as a table, after a blank line that
// separates it from the lock's; nothing when no one waits.
func printLine(w io.Writer, line []waiterStatus) error {
	if len(line) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tWAITER\tORDER\tJOINED")
	for _, ws := range line {
		holder, joined := ws.Holder, "-"
		switch {
		case ws.Error != "":
			holder = ws.Error
		case holder == "":
			holder = "-"
		}
		if !ws.JoinedAt.IsZero() {
			joined = ws.JoinedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strconv.Itoa(ws.Position), holder, ws.Order, joined)
	}
	return tw.Flush()
}
