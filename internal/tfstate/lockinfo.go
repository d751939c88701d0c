package tfstate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/textsafe"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// LockInfo is Terraform's lock info (its statemgr.LockInfo, as JSON): what
// Terraform sends with a lock request of the http backend, what the S3
// backend writes into its lock file, and what a waiting run is shown.
type LockInfo struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Info      string    `json:"Info"`
	Who       string    `json:"Who"`
	Version   string    `json:"Version"`
	Created   time.Time `json:"Created"`
	Path      string    `json:"Path"`
}

// MaxLockInfo bounds a lock info read from a request or a lock file:
// Terraform's are a few hundred bytes.
const MaxLockInfo = 64 << 10

// ParseLockInfo reads a lock info. Its text fields are made safe to print
// (control characters, which could rewrite a terminal or a CI log, are
// replaced) and bounded.
func ParseLockInfo(b []byte) (LockInfo, error) {
	var li LockInfo
	if len(b) > MaxLockInfo {
		return li, fmt.Errorf("the lock info is %d bytes; at most %d are read", len(b), MaxLockInfo)
	}
	if err := json.Unmarshal(b, &li); err != nil {
		return li, fmt.Errorf("the lock info is not Terraform's lock info JSON: %w", err)
	}
	for _, f := range []*string{&li.ID, &li.Operation, &li.Info, &li.Who, &li.Version, &li.Path} {
		*f = Printable(*f)
	}
	return li, nil
}

// JSON is the lock info as Terraform writes it.
func (li LockInfo) JSON() []byte {
	b, _ := json.Marshal(li) // a struct of strings and a time: cannot fail
	return b
}

// maxPrintable bounds a text from outside (a holder, a lock info field)
// that s3lock prints.
const maxPrintable = 256

// Printable returns s fit to print into a terminal or a log (textsafe):
// each character that is not graphic (escape sequences, carriage returns,
// newlines) escaped, and at most maxPrintable bytes.
func Printable(s string) string { return textsafe.Escape(s, maxPrintable) }

// TerraformWho and TerraformOperation are the who and operation of
// Terraform's lock info that a state's lease carries in its metadata
// (Store.Lock writes them); "" for any other lease, whose own metadata may
// name a "who" that is not Terraform's (a state's lock is named KEY.s3lock
// and its lease names the state).
func TerraformWho(held *s3lock.HeldError) string { return lockInfoField(held, MetaWho) }

// TerraformOperation: see TerraformWho.
func TerraformOperation(held *s3lock.HeldError) string { return lockInfoField(held, MetaOperation) }

func lockInfoField(held *s3lock.HeldError, key string) string {
	if !strings.HasSuffix(held.Name, LockSuffix) || held.Metadata[MetaState] == "" {
		return ""
	}
	return held.Metadata[key]
}

// HolderInfo is Terraform's lock info for a state lock that an s3lock lease
// holds (what a run that finds it held is shown): the lock ID is the
// lease's epoch (what force-unlock takes), or, for a lock plans hold
// shared, the named plan's share ("EPOCH.SHARE"); Info says how many plans
// share it, or that the holder is an exclusive run (an apply) that waits for
// the plans before it.
func HolderInfo(held *s3lock.HeldError, state string) LockInfo {
	li := LockInfo{Path: state, Operation: Printable(TerraformOperation(held)), Who: Printable(TerraformWho(held)),
		Created: held.AcquiredAt.UTC()}
	holder := Printable(held.Holder)
	switch {
	case held.Queued:
		li.Info = fmt.Sprintf("s3lock: the state lock %s is free, but %d run(s) wait in its line before this one", held.Name, held.Ahead)
		return li
	case holder == "":
		holder = "an unknown holder"
	}
	li.ID = HeldLockID(held)
	left := held.ExpiresIn.Round(time.Second)
	switch {
	case held.Shared:
		li.Info = fmt.Sprintf("held shared through s3lock by %d plan(s) (lock %s, shared epoch %d), among them %s, whose "+
			"share lapses in %s unless renewed; an operation that writes the state waits for every plan",
			max(held.Waiting, 1), held.Name, held.Epoch, holder, left)
	case held.Pending:
		li.Info = fmt.Sprintf("held through s3lock by %s (lock %s, epoch %d), an exclusive run that waits for the plans "+
			"that hold the lock shared before it (no new plan joins meanwhile); it lapses in %s unless renewed",
			holder, held.Name, held.Epoch, left)
	default:
		li.Info = fmt.Sprintf("held through s3lock by %s (lock %s, epoch %d), which lapses in %s unless renewed",
			holder, held.Name, held.Epoch, left)
	}
	if held.Ahead > 0 {
		li.Info += fmt.Sprintf("; %d run(s) wait in its line before this one", held.Ahead)
	}
	if li.Who == "" {
		li.Who = holder
	}
	return li
}
