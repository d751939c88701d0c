package s3lock

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/s3lock/terraform-provider-s3lock/s3lock/internal/bridge"
)

// MaxEpoch is the largest epoch a lock can reach: epochs are written with
// ten decimal digits, so that keys sort in epoch order.
const MaxEpoch uint64 = 9_999_999_999

// maxNameLength bounds a lock name so that every key it produces stays well
// inside S3's 1,024-byte key limit.
const maxNameLength = 512

const (
	epochDigits = 10
	keyStem     = "lock-"
	keyExt      = ".json"
)

// ValidateName reports whether name can name a lock. A name is a key path
// of at most 512 bytes: segments of letters, digits and "-_.=+@,:!~"
// separated by single slashes,
// without a leading or trailing slash, not starting with "::" (a CI runner
// reads a log line that starts with it as a command), without "." or ".."
// segments (which would escape the name's prefix on file-backed stores),
// without a segment
// that looks like an epoch object ("lock-*.json"), and without the segments
// "s3lock-probe" (reserved for storecheck's probes), "lock-line" (reserved for
// the waiting line of ordered Acquires), "lock-slots" (reserved for the
// slots of a lock acquired with WithSlots) and "lock-shared" (reserved for
// the shares of shared holders, WithShared). The error matches ErrInvalidName.
//
// ValidateName looks at the name only. Whether the store can keep the lock's
// objects under it is another matter: S3 keeps an object "deploy" and the
// locks "deploy" and "deploy/prod" side by side, but on a store whose keys
// are files (versitygw's posix backend) an object at the name or at a parent
// path of it refuses the lock's keys, and MinIO hides the lock "deploy"'s
// objects from listings while an object "deploy" exists. Acquire detects
// both and fails with ErrNameCollision, naming the object; name locks apart
// from the objects they guard ("locks/deploy", not "deploy") to stay clear
// of it everywhere.
func ValidateName(name string) error {
	reason := ""
	switch {
	case name == "":
		reason = "it is empty"
	case strings.HasSuffix(name, "/"):
		reason = "it ends with a slash"
	default:
		reason = pathProblem(name, strings.Split(name, "/"))
	}
	if reason != "" {
		return &NameError{Name: name, Reason: reason}
	}
	return nil
}

// probeSegment is the path segment under which package storecheck writes
// its probes. No lock name contains it, so List never shows a probe as a
// lock.
const probeSegment = bridge.ProbeSegment

// ValidatePrefix reports whether prefix can start a lock name, as List,
// `s3lock status --prefix` and the s3lock_leases data source take it: ""
// (every lock), or the beginning of a valid name, with or without a
// trailing slash. It refuses what no lock name can start with, by the
// rules of ValidateName applied to every complete segment (the last one may
// be cut short). The error matches ErrInvalidName.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	segs := strings.Split(prefix, "/")
	if reason := pathProblem(prefix, segs[:len(segs)-1]); reason != "" {
		return &NameError{Name: prefix, Reason: reason, Prefix: true}
	}
	return nil
}

// pathProblem says what makes path (a name or a prefix of one) impossible
// as the start of a lock name, judging the given segments whole; "" if
// nothing does.
func pathProblem(path string, segments []string) string {
	switch {
	case len(path) > maxNameLength:
		return fmt.Sprintf("it is %d bytes long; the limit is %d", len(path), maxNameLength)
	case !utf8.ValidString(path):
		return "it is not valid UTF-8"
	case strings.HasPrefix(path, "/"):
		return "it starts with a slash"
	case strings.HasPrefix(path, "::"):
		// Names start lines (status, watch): CI runners take a log line
		// that starts with "::" as a command (GitHub's "::error::").
		return `it starts with "::", which CI runners read as a command at the start of a log line`
	}
	for _, r := range path {
		if !nameRune(r) {
			return fmt.Sprintf("it contains %q; use letters, digits, '/' and -_.=+@,:!~", r)
		}
	}
	for _, seg := range segments {
		switch {
		case seg == "":
			return "it contains an empty path segment (\"//\")"
		case seg == "." || seg == "..":
			return fmt.Sprintf("it contains a %q segment, which could escape the lock's prefix", seg)
		case strings.HasPrefix(seg, keyStem) && strings.HasSuffix(seg, keyExt):
			return fmt.Sprintf("segment %q looks like an epoch object of another lock", seg)
		case seg == probeSegment:
			return fmt.Sprintf("the segment %q is reserved for storecheck's probe objects", probeSegment)
		case seg == lineSegment:
			return fmt.Sprintf("the segment %q is reserved for the waiting line of a lock", lineSegment)
		case seg == slotSegment:
			return fmt.Sprintf("the segment %q is reserved for the slots of a lock", slotSegment)
		case seg == sharedSegment:
			return fmt.Sprintf("the segment %q is reserved for the shares of a lock's shared holders", sharedSegment)
		}
	}
	return ""
}

func nameRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("/-_.=+@,:!~", r)
}

// epochKey returns the object key of one epoch of the lock name, e.g.
// "locks/lock-0000000001.json" for epoch 1 of the lock "locks".
func epochKey(name string, epoch uint64) string {
	return epochPrefix(name) + fmt.Sprintf("%0*d", epochDigits, epoch) + keyExt
}

// epochPrefix is the common prefix of all the epoch objects of a lock.
func epochPrefix(name string) string { return name + "/" + keyStem }

// parseKey returns the lock name and epoch of an epoch object's key, and
// false for any other key.
func parseKey(key string) (name string, epoch uint64, ok bool) {
	slash := strings.LastIndexByte(key, '/')
	if slash <= 0 {
		return "", 0, false
	}
	base := key[slash+1:]
	if len(base) != len(keyStem)+epochDigits+len(keyExt) ||
		!strings.HasPrefix(base, keyStem) || !strings.HasSuffix(base, keyExt) {
		return "", 0, false
	}
	digits := base[len(keyStem) : len(keyStem)+epochDigits]
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return "", 0, false
		}
	}
	epoch, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || epoch == 0 {
		return "", 0, false
	}
	return key[:slash], epoch, true
}

// lineSegment is the path segment under a lock's epoch prefix that holds
// its waiting line: "<name>/lock-line/". No lock name contains it, so no
// lock's keys share the line's prefix.
const lineSegment = keyStem + "line"

// linePrefix is the common prefix of all the tickets in the line of a lock.
func linePrefix(name string) string { return name + "/" + lineSegment + "/" }

// ticketIDDigits is the length of the random hex suffix of a ticket key.
const ticketIDDigits = 16

// ticketKey returns the key of a ticket in the line of name:
// "<name>/lock-line/<n, 10 digits>-<order>-<id>.json", and for a shared
// waiter (WithShared) "...-<id>-shared.json", which an s3lock without
// shared leases does not take for a ticket (it refuses a shared lock
// anyway: format 4).
func ticketKey(name string, n uint64, o Order, id string, shared bool) string {
	suffix := ""
	if shared {
		suffix = "-" + modeShared
	}
	return linePrefix(name) + fmt.Sprintf("%0*d-%s-%s%s", epochDigits, n, o, id, suffix) + keyExt
}

// ticketRef is what a ticket's key says about it.
type ticketRef struct {
	key    string
	n      uint64
	order  Order
	shared bool // a shared waiter's (WithShared)
}

// parseTicket parses a key under name's line prefix; ok is false for any
// key that is not a ticket (such keys are ignored, never deleted).
func parseTicket(name, key string) (ticketRef, bool) {
	rest, ok := strings.CutPrefix(key, linePrefix(name))
	if !ok {
		return ticketRef{}, false
	}
	rest, ok = strings.CutSuffix(rest, keyExt)
	if !ok {
		return ticketRef{}, false
	}
	parts := strings.Split(rest, "-")
	shared := len(parts) == 4 && parts[3] == modeShared
	if shared {
		parts = parts[:3]
	}
	if len(parts) != 3 || len(parts[0]) != epochDigits || len(parts[2]) != ticketIDDigits || !isHex(parts[2]) {
		return ticketRef{}, false
	}
	n, err := strconv.ParseUint(parts[0], 10, 64)
	o := Order(parts[1])
	if err != nil || n == 0 || (o != OrderFIFO && o != OrderNewest) {
		return ticketRef{}, false
	}
	return ticketRef{key: key, n: n, order: o, shared: shared}, true
}

func isHex(s string) bool {
	for i := range len(s) {
		if !strings.ContainsRune("0123456789abcdef", rune(s[i])) {
			return false
		}
	}
	return true
}

// ticketOwner returns the lock whose line holds the ticket key, if key is one.
func ticketOwner(key string) (string, bool) {
	i := strings.LastIndex(key, "/"+lineSegment+"/")
	if i <= 0 {
		return "", false
	}
	name := key[:i]
	if _, ok := parseTicket(name, key); !ok || ValidateName(name) != nil {
		return "", false
	}
	return name, true
}

// slotSegment is the path segment under a lock's epoch prefix that holds the
// slots of a lock acquired with WithSlots: slot i is the lock
// "<name>/lock-slots/<i>", with epoch objects of its own. No lock name
// contains the segment, so no lock's keys share a slot's.
const slotSegment = keyStem + "slots"

// slotPrefix is the common prefix of the keys of every slot of name.
func slotPrefix(name string) string { return name + "/" + slotSegment + "/" }

// slotName returns the name of slot i (1-based) of the lock name.
func slotName(name string, i int) string { return slotPrefix(name) + strconv.Itoa(i) }

// slotOwner returns the lock, slot and epoch of an epoch object of a slot
// ("<name>/lock-slots/<i>/lock-<e>.json"); ok is false for any other key.
func slotOwner(key string) (name string, slot int, epoch uint64, ok bool) {
	sub, epoch, ok := parseKey(key)
	if !ok {
		return "", 0, 0, false
	}
	name, slot, ok = splitSlotName(sub)
	return name, slot, epoch, ok
}

// sharedSegment is the path segment under a lock's epoch prefix that holds
// the shares of its shared holders (WithShared, PROTOCOL.md §17):
// "<name>/lock-shared/<S, 10 digits>/<id>.json" is a share under shared
// epoch S. No lock name contains it, so no lock's keys share a share's.
const sharedSegment = keyStem + "shared"

// shareIDDigits is the length of a share's random hex id.
const shareIDDigits = 16

// sharePrefix is the common prefix of every share of every epoch of name.
func sharePrefix(name string) string { return name + "/" + sharedSegment + "/" }

// shareKey returns the key of share id under shared epoch epoch of name.
func shareKey(name string, epoch uint64, id string) string {
	return fmt.Sprintf("%s%0*d/%s%s", sharePrefix(name), epochDigits, epoch, id, keyExt)
}

// parseShareKey returns the shared epoch of a share of name; ok is false for
// any other key (ignored, never deleted).
func parseShareKey(name, key string) (epoch uint64, ok bool) {
	rest, ok := strings.CutPrefix(key, sharePrefix(name))
	if !ok {
		return 0, false
	}
	digits, file, ok := strings.Cut(rest, "/")
	if !ok || len(digits) != epochDigits {
		return 0, false
	}
	id, ok := strings.CutSuffix(file, keyExt)
	if !ok || len(id) != shareIDDigits || !isHex(id) {
		return 0, false
	}
	epoch, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || epoch == 0 || epoch > MaxEpoch {
		return 0, false
	}
	return epoch, true
}
