package fence

import (
	"errors"
	"fmt"
)

// Sentinel errors: why Put refused a write. Branch on them with errors.Is;
// the error is an *Error with the detail.
var (
	// ErrFenced means Put refused to write because the object was
	// already written under a newer epoch than the caller's: the caller's
	// lease has been superseded. The error is an *Error.
	ErrFenced = errors.New("s3lock: fenced write refused")

	// ErrIdenticalRewrite means Put refused to write, under a newer
	// epoch than the object records, the bytes the object already holds:
	// its ETag would not change, so a writer of an older epoch that read it
	// could still overwrite it. Nothing was written and the lease is not
	// affected; make the body differ per epoch (for example by including
	// the epoch) and write again. The error is an *Error.
	ErrIdenticalRewrite = errors.New("s3lock: identical rewrite under a newer epoch")

	// ErrObjectChanged means Put, asked to write only over the state
	// the caller read (the input's IfMatch or IfNoneMatch), found the object
	// changed: writing would lose the update made since. Nothing was
	// written over the changed state; read again and redo the change (see
	// Error.MayHaveWritten). The error is an *Error.
	ErrObjectChanged = errors.New("s3lock: object changed since it was read")
)

// Error reports that Put refused to write. Err says why, and
// errors.Is matches it: ErrFenced (a newer epoch wrote the object: this
// lease is superseded), ErrIdenticalRewrite (the body is the object's
// current content, which an older epoch wrote: change the body, the lease
// may well be current, so a caller that stops on ErrFenced must not stop
// here) or ErrObjectChanged (a read-modify-write found the object changed
// since it was read: read again and redo the change).
type Error struct {
	Err     error // ErrFenced, ErrIdenticalRewrite or ErrObjectChanged
	Bucket  string
	Key     string
	Epoch   uint64 // the caller's epoch
	Current uint64 // the epoch recorded on the object (0: none, or not read)
	// Expected is the ETag a read-modify-write read ("" if it read the
	// object absent); Found what the object has now ("" if it is absent).
	Expected string
	Found    string
	// MayHaveWritten is set, with ErrObjectChanged, when a PUT of this call
	// went out before the change was seen: its answer may have been lost
	// after it landed, and the change may be on top of it. Read the object
	// before redoing an update that must not apply twice.
	MayHaveWritten bool
}

func (e *Error) Error() string {
	where := fmt.Sprintf("s3lock: fenced write to s3://%s/%s refused: ", e.Bucket, e.Key)
	switch {
	case errors.Is(e.Err, ErrFenced):
		return where + fmt.Sprintf("it was last written under epoch %d, newer than this lease's epoch %d", e.Current, e.Epoch)
	case errors.Is(e.Err, ErrIdenticalRewrite):
		by := fmt.Sprintf("last written under epoch %d", e.Current)
		if e.Current == 0 {
			by = "written without a fencing epoch"
		}
		return where + fmt.Sprintf("the body is the object's current content, "+
			"%s; writing it again under epoch %d would not change the object's ETag, "+
			"so an older writer that read it could still overwrite it; "+
			"make the body differ per epoch, for example by including the epoch", by, e.Epoch)
	}
	state := func(etag string) string {
		if etag == "" {
			return "absent"
		}
		return "ETag " + etag
	}
	return where + fmt.Sprintf("the object changed since it was read (read %s, now %s); "+
		"read it again and redo the change", state(e.Expected), state(e.Found))
}

// Unwrap returns Err, the sentinel that says why.
func (e *Error) Unwrap() error { return e.Err }
