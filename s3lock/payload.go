package s3lock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/s3lock/terraform-provider-s3lock/internal/textsafe"
)

// maxPayloadBytes bounds the size of an epoch object that this package will
// read (and write): a lease is a few hundred bytes; anything much larger is
// not one of ours, and reading it whole would let a stray object exhaust
// memory.
const maxPayloadBytes = 64 << 10

// maxMetadataBytes bounds user metadata so that a payload always fits.
const maxMetadataBytes = 16 << 10

// maxForeignValidity bounds the validity read from an object: larger values
// (or a negative one) are not something a lease holder could mean.
const maxForeignValidity = 366 * 24 * time.Hour

// formatVersion is written in every lease's payload as "s3lock".
const formatVersion = 1

// markerFormat is the format of a slot lock's marker (PROTOCOL.md §14): a
// newer format than a lease's, so that an s3lock that predates Slots reads
// the marker as unreadable and refuses the lock rather than taking it.
//
// Format 3 (markerFormat) says that every epoch of the lock's slots carries
// its size code (sizecode.go), so that the slots may be judged from a
// listing; a format 2 marker (written before size codes) makes every slot
// be read, and an s3lock that reads only format 2 refuses a format 3 marker.
const markerFormat = 3

// sizeCodedMarkers is the first marker format whose slots carry size codes;
// oldMarkerFormat the marker format before it.
const (
	oldMarkerFormat  = 2
	sizeCodedMarkers = 3
)

// sharedFormat is the format of the objects of shared leases (WithShared,
// PROTOCOL.md §17) that an s3lock without them must not take over: a shared
// epoch (it would read validityMs 0 as a lapsed lease), a share, and an
// exclusive epoch still pending (it would take the next epoch without
// waiting for the shares below it). Such an s3lock reads format 3 at most
// and refuses the lock. A cleared exclusive epoch is format 1 again.
const sharedFormat = 4

// modeShared is a payload's "mode" on a shared epoch and a share.
const modeShared = "shared"

// readFormat is the newest format this package reads.
const readFormat = sharedFormat

// This file holds the bodies this package writes, one family: an epoch
// object's payload and a line's ticket. Each begins with an owner (fields of
// the article the protocol comes from, so tools that read that format read
// ours), carries its writer's nonce and a write id per write (which settle
// compares), is a JSON object of at most maxPayloadBytes (bodyObject), and
// has its text made fit to print when read (shown). Unknown fields are
// ignored on read.

// owner is the first fields of every body: who wrote it, and for how long
// it holds without being written again.
type owner struct {
	Holder     string `json:"leaderId"`
	ValidityMs int64  `json:"validityMs"`
}

func (o *owner) validity() time.Duration {
	return time.Duration(o.ValidityMs) * time.Millisecond
}

// payload is the JSON body of an epoch object: an owner (who acquired the
// lease), whether it was released (by its holder or an operator), then
// ours.
type payload struct {
	owner
	Released bool `json:"expired"`

	Format     int       `json:"s3lock,omitempty"`
	Epoch      uint64    `json:"epoch,omitempty"`
	Nonce      string    `json:"nonce,omitempty"`
	AcquiredAt time.Time `json:"acquiredAt,omitzero"`
	// MaxHoldUntil is the lease's cap (WithMaxHold), by its acquirer's
	// clock: AcquiredAt plus the maximum hold. Readers that predate it
	// ignore it.
	MaxHoldUntil time.Time         `json:"maxHoldUntil,omitzero"`
	RenewedAt    time.Time         `json:"renewedAt,omitzero"`
	Renewals     uint64            `json:"renewals"`
	Write        string            `json:"write,omitempty"` // random per write: tells our write from anyone else's
	ReleasedAt   time.Time         `json:"releasedAt,omitzero"`
	ReleasedBy   string            `json:"releasedBy,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	// Slots is set in a slot lock's marker only: how many holders the lock
	// admits.
	Slots int `json:"slots,omitempty"`
	// Mode is "shared" on a shared epoch (which has no holder of its own)
	// and on a share (a shared holder's lease, Share its id); Pending is
	// set on an exclusive epoch whose writer waits, or waited and gave up,
	// for shares below it (PROTOCOL.md §17). Both are format 4.
	Mode    string `json:"mode,omitempty"`
	Share   string `json:"share,omitempty"`
	Pending bool   `json:"pending,omitempty"`

	// read holds the text fields as the object had them, when shown
	// escaped them (nil otherwise): a rewrite of someone else's object
	// (ForceRelease) keeps what was there.
	read *payloadText
}

// payloadText is the text of a payload that readers escape.
type payloadText struct {
	holder, releasedBy, reason string
	metadata                   map[string]string
}

// asRead puts back the text fields as the object had them (see read).
func (p *payload) asRead() {
	if t := p.read; t != nil {
		p.Holder, p.ReleasedBy, p.Reason, p.Metadata = t.holder, t.releasedBy, t.reason, t.metadata
		p.read = nil
	}
}

// maxHold is the lease's maximum hold (WithMaxHold), 0 for none.
func (p *payload) maxHold() time.Duration {
	if p.MaxHoldUntil.IsZero() {
		return 0
	}
	return p.MaxHoldUntil.Sub(p.AcquiredAt)
}

// cutForCap reports whether p's validity was cut to end at its cap: counted
// from when it was written (RenewedAt, else AcquiredAt; its writer's
// clock, as the cap), its writer's trust ends less than a millisecond — the
// validity's resolution — before the cap, or after it.
func (p *payload) cutForCap() bool {
	if p.MaxHoldUntil.IsZero() {
		return false
	}
	at := p.RenewedAt
	if at.IsZero() {
		at = p.AcquiredAt
	}
	v := p.validity()
	return at.Add(v - safetyMargin(v)).After(p.MaxHoldUntil.Add(-time.Millisecond))
}

// marker reports whether p is a slot lock's marker that is in force (not
// released).
func (p *payload) marker() bool { return p.Slots > 1 && !p.Released }

// sharedEpoch reports whether p is a shared epoch: open while it is the
// newest epoch, held by its shares, never renewed, released or lapsed.
func (p *payload) sharedEpoch() bool { return p.Mode == modeShared && p.Share == "" }

// encode returns the JSON body, padded with spaces to its size code
// (sizecode.go). Every write of a lease changes at least the renewal
// counter, so two writes never have the same body (and so never the same
// MD5 ETag).
func (p *payload) encode() ([]byte, error) {
	b, err := encodeBody(p, "lease payload")
	if err != nil {
		return nil, err
	}
	b = padToSizeCode(b, p)
	if len(b) > maxPayloadBytes {
		return nil, fmt.Errorf("%w: the lease payload would be %d bytes; the limit is %d (reduce the metadata)",
			ErrInvalidConfig, len(b), maxPayloadBytes)
	}
	return b, nil
}

// decodePayload reads at most maxPayloadBytes from r and checks that the
// result is a lease for the given epoch (0: any). Its errors are
// *corruptLeaseError without bucket and key; callers add them.
func decodePayload(r io.Reader, epoch uint64) (*payload, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPayloadBytes+1))
	if err != nil {
		return nil, err
	}
	return parsePayload(data, epoch)
}

func parsePayload(data []byte, epoch uint64) (*payload, error) {
	trimmed, err := bodyObject(data)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(trimmed) {
		return nil, corrupt("it is not valid UTF-8")
	}
	var p payload
	if err := json.Unmarshal(trimmed, &p); err != nil {
		return nil, corrupt("it is not a lease JSON document: %v", err)
	}
	switch {
	case p.ValidityMs < 0:
		return nil, corrupt("validityMs is negative (%d)", p.ValidityMs)
	case p.ValidityMs > maxForeignValidity.Milliseconds():
		return nil, corrupt("validityMs %d is longer than a year", p.ValidityMs)
	case epoch != 0 && p.Epoch != 0 && p.Epoch != epoch:
		return nil, corrupt("it claims epoch %d but its key is epoch %d", p.Epoch, epoch)
	case !p.MaxHoldUntil.IsZero() && !p.MaxHoldUntil.After(p.AcquiredAt):
		return nil, corrupt("maxHoldUntil %s is not after acquiredAt %s", p.MaxHoldUntil.Format(time.RFC3339Nano),
			p.AcquiredAt.Format(time.RFC3339Nano))
	case p.Format > readFormat:
		return nil, corrupt("it was written by a newer s3lock (format %d; this one reads %d)", p.Format, readFormat)
	case (p.Slots != 0 || p.Format == oldMarkerFormat || p.Format == markerFormat) &&
		(p.Slots < 2 || p.Slots > MaxSlots || p.Format < oldMarkerFormat || p.Format > markerFormat):
		return nil, corrupt("slots %d is not a marker this s3lock writes (format %d or %d, slots 2 to %d)", p.Slots, oldMarkerFormat, markerFormat, MaxSlots)
	case (p.Format == sharedFormat) != (p.Mode != "" || p.Pending),
		p.Mode != "" && (p.Mode != modeShared || p.Pending),
		p.Share != "" && (p.Mode != modeShared || len(p.Share) != shareIDDigits || !isHex(p.Share)):
		return nil, corrupt("mode %q, share %q, pending %t and format %d are not a shared lease's object this s3lock writes",
			shown(p.Mode), shown(p.Share), p.Pending, p.Format)
	}
	read := payloadText{holder: p.Holder, releasedBy: p.ReleasedBy, reason: p.Reason, metadata: maps.Clone(p.Metadata)}
	p.Holder, p.ReleasedBy, p.Reason = shown(p.Holder), shown(p.ReleasedBy), shown(p.Reason)
	p.Metadata = shownMetadata(p.Metadata)
	if p.Holder != read.holder || p.ReleasedBy != read.releasedBy || p.Reason != read.reason || !maps.Equal(p.Metadata, read.metadata) {
		p.read = &read
	}
	return &p, nil
}

// corrupt is a *corruptLeaseError without bucket and key: why a body read is
// not one of ours.
func corrupt(format string, args ...any) error {
	return &corruptLeaseError{Reason: fmt.Sprintf(format, args...)}
}

// bodyObject checks that data can be a body of this package (at most
// maxPayloadBytes, a JSON object) and returns it trimmed of white space.
func bodyObject(data []byte) ([]byte, error) {
	if len(data) > maxPayloadBytes {
		return nil, corrupt("it is larger than %d bytes", maxPayloadBytes)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, corrupt("it is not a JSON object")
	}
	return trimmed, nil
}

// encodeBody returns the JSON of a body; what names it in the error.
func encodeBody(b any, what string) ([]byte, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("s3lock: encoding %s: %w", what, err)
	}
	return data, nil
}

// ticketBody is the JSON body of a ticket: an owner, so that a reader of an
// epoch object's format sees who waits and for how long a ticket lives
// without a heartbeat, then the ticket's own fields.
type ticketBody struct {
	owner
	Format    int               `json:"s3lock"`
	Line      bool              `json:"line"`
	Order     Order             `json:"order"`
	Nonce     string            `json:"nonce"`
	Write     string            `json:"write"`
	Renewals  uint64            `json:"renewals"`
	JoinedAt  time.Time         `json:"joinedAt,omitzero"`
	RenewedAt time.Time         `json:"renewedAt,omitzero"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// newTicketBody is the body of a new ticket of holder's, joining at now.
func newTicketBody(holder string, order Order, now time.Time, metadata map[string]string) ticketBody {
	return ticketBody{owner: owner{Holder: holder, ValidityMs: ticketValidity.Milliseconds()}, Format: formatVersion,
		Line: true, Order: order, Nonce: randomHex(16), Write: randomHex(8), JoinedAt: now.UTC(), Metadata: metadata}
}

func (b *ticketBody) encode() ([]byte, error) { return encodeBody(b, "a line ticket") }

// parseTicketBody checks that data is a ticket; its errors are
// *corruptLeaseError without bucket and key.
func parseTicketBody(data []byte) (*ticketBody, error) {
	trimmed, err := bodyObject(data)
	if err != nil {
		return nil, err
	}
	var b ticketBody
	if err := json.Unmarshal(trimmed, &b); err != nil {
		return nil, corrupt("it is not a line ticket: %v", err)
	}
	if !b.Line || b.Nonce == "" {
		return nil, corrupt("it is not a line ticket (no \"line\" or \"nonce\" field)")
	}
	b.Holder, b.Metadata = shown(b.Holder), shownMetadata(b.Metadata)
	return &b, nil
}

// shownMetadata is metadata read from the bucket with its keys and values
// made fit to print, as shown does (WithMetadata writes only such text).
func shownMetadata(m map[string]string) map[string]string {
	for k, v := range m {
		if !textsafe.Safe(k) || !textsafe.Safe(v) {
			delete(m, k)
			m[textsafe.Escape(k, 0)] = textsafe.Escape(v, 0)
		}
	}
	return m
}

// maxShownText bounds a holder, releasedBy or reason read from an object:
// s3lock writes at most maxHolderBytes.
const maxShownText = maxHolderBytes

// shown makes a text field read from the bucket fit to print (PROTOCOL.md
// §3, "Text read from the bucket"): s3lock validates what it writes
// (ValidateHolder), but anyone who may put an object under a lock's keys
// can write any bytes, and holders end up in terminals, CI logs and
// Terraform's diagnostics. A text that breaks the rule is kept, escaped
// (`\x1b`, `\n`), so that it stays on one line and shows what was there.
func shown(s string) string { return textsafe.Escape(s, maxShownText) }

func metadataSize(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + 6
	}
	return n
}
