package chaos

import (
	"errors"
	"fmt"
	"strings"
)

// maxViolations bounds how many violations a failure message lists.
const maxViolations = 3

// CheckExclusive checks mutual exclusion of trusted leases (PROTOCOL.md §1,
// guarantee 1; §17, G1) on the critical sections: no two sections of
// different leases overlap in time while both were trusted, each from its
// beginning to its TrustedEnd, unless both are shared. Sections must be
// ordered by Begin (as Sections returns them). Comparing each section with
// the one begun before it that is trusted longest finds some overlapping
// pair whenever a section of an exclusive lease overlaps any other.
func CheckExclusive(sections []*Section) error {
	var found []string
	var latest *Section // of the sections begun so far, the one trusted longest
	for _, s := range sections {
		if latest != nil && s.Begin <= latest.TrustedEnd() && s.owner() != latest.owner() && (!s.Shared || !latest.Shared) {
			found = append(found, fmt.Sprintf("  %s    overlaps, while both were trusted, with\n  %s", latest.describe(), s.describe()))
			if len(found) == maxViolations {
				break
			}
		}
		if latest == nil || s.TrustedEnd() > latest.TrustedEnd() {
			latest = s
		}
	}
	if len(found) == 0 {
		return nil
	}
	return errors.New("mutual exclusion: critical sections of two leases overlapped while both were trusted:\n" + strings.Join(found, "\n"))
}

// CheckEpochOrder checks that epochs strictly increase in the order critical
// sections began (PROTOCOL.md §1, guarantee 2): a section never begins under
// an epoch older than one already begun, and two processes never work under
// the same epoch unless both hold it shared (§17). Sections must be ordered
// by Begin.
func CheckEpochOrder(sections []*Section) error {
	var found []string
	var newest *Section
	for _, s := range sections {
		if newest != nil {
			switch {
			case s.Epoch < newest.Epoch:
				found = append(found, fmt.Sprintf("  epoch %d began after epoch %d:\n  %s  %s", s.Epoch, newest.Epoch, newest.describe(), s.describe()))
			case s.Epoch == newest.Epoch && s.Proc != newest.Proc && (!s.Shared || !newest.Shared):
				found = append(found, fmt.Sprintf("  two processes worked under epoch %d:\n  %s  %s", s.Epoch, newest.describe(), s.describe()))
			}
			if len(found) == maxViolations {
				break
			}
		}
		if newest == nil || s.Epoch >= newest.Epoch {
			newest = s
		}
	}
	if len(found) == 0 {
		return nil
	}
	return errors.New("epoch order: epochs did not strictly increase in the order critical sections began:\n" + strings.Join(found, "\n"))
}
