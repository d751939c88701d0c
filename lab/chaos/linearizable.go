package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// registerModel is the register's sequential specification: its state is
// the counter. A read must return the state; a write is a compare-and-swap
// from the value its critical section read to that value plus one (the
// workers write conditionally on the state they read, see
// chaos/cmd/worker). A write whose outcome is unknown (Return Pending) may
// have happened or not: where the state equals its From it takes effect,
// elsewhere it is a swap that failed. That covers both possibilities,
// because a pending write may be placed anywhere after its call, also after
// the final read of the register that closes every history.
var registerModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, _ any) (bool, any) {
		st, op := state.(int64), input.(Op)
		switch {
		case op.Kind == OpRead:
			return st == op.Value, st
		case st == op.From:
			return true, op.To
		case op.Return == Pending:
			return true, st
		}
		return false, st
	},
	DescribeOperation: func(input, _ any) string { return input.(Op).String() },
	DescribeState:     func(state any) string { return fmt.Sprint(state.(int64)) },
}

// linearizeTimeout bounds porcupine's search. Histories of the chaos run
// (thousands of mostly sequential operations) check in well under a second;
// a search that runs out is reported, never taken as a pass.
const linearizeTimeout = 2 * time.Minute

// maxShown bounds how many operations a failure message lists.
const maxShown = 8

// CheckLinearizable checks that the register operations are linearizable
// under registerModel. If visualize is not empty, a failing history's
// porcupine visualization is written there (an HTML file).
func CheckLinearizable(ops []Op, visualize string) error {
	history := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		history[i] = porcupine.Operation{ClientId: i, Input: o, Call: o.Call, Return: o.Return}
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, linearizeTimeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("linearizability: porcupine found no answer within %s for %d operations", linearizeTimeout, len(ops))
	}
	msg := explainIllegal(ops, info)
	if visualize != "" {
		if err := porcupine.VisualizePath(registerModel, info, visualize); err == nil {
			msg += "\n  porcupine's visualization: " + visualize
		}
	}
	return errors.New(msg)
}

// explainIllegal describes where the history stops being linearizable: the
// longest prefix porcupine could linearize, the state it reached, and the
// operations that could have come next but fit no order.
func explainIllegal(ops []Op, info porcupine.LinearizationInfo) string {
	var longest []porcupine.Operation
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, lin := range partition {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	state := int64(0)
	done := map[Op]bool{}
	for _, o := range longest {
		_, next := registerModel.Step(state, o.Input, nil)
		state = next.(int64)
		done[o.Input.(Op)] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "linearizability: the register history is not linearizable (a lost or phantom update): "+
		"at most %d of its %d operations fit a sequential order, which leaves the counter at %d.\n", len(longest), len(ops), state)
	b.WriteString("  the last operations of that order:\n")
	for _, o := range longest[max(0, len(longest)-maxShown/2):] {
		fmt.Fprintf(&b, "    %s\n", o.Input.(Op))
	}
	b.WriteString("  operations that could come next, none of which fits:\n")
	for _, o := range candidates(ops, done) {
		fmt.Fprintf(&b, "    %s\n", o)
	}
	return b.String()
}

// candidates returns the earliest operations not yet linearized: those
// called before the first of them returned.
func candidates(ops []Op, done map[Op]bool) []Op {
	var rest []Op
	for _, o := range ops {
		if !done[o] {
			rest = append(rest, o)
		}
	}
	slices.SortFunc(rest, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	firstReturn := Pending
	for _, o := range rest {
		firstReturn = min(firstReturn, o.Return)
	}
	var out []Op
	for _, o := range rest {
		if o.Call <= firstReturn && len(out) < maxShown {
			out = append(out, o)
		}
	}
	return out
}
