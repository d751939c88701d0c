package s3lock

import (
	"bytes"
	"time"
)

// This file holds the size code of epoch objects (PROTOCOL.md §3, §14): what
// a listing's Size of an epoch object says about it, so that a slot lock's
// slots can be judged from one LIST of them instead of a GET each.
//
// Every epoch object s3lock writes is its JSON payload followed by 0 to
// sizeModulus-1 spaces (which JSON ignores), so that its size modulo
// sizeModulus is its size code: validityClass of its lease's validity, plus
// sizeReleased when it is released. A listing then tells, for each slot's
// newest epoch, whether it is released, and an upper bound of its validity,
// which with its Last-Modified and the listing's Date bounds when it lapses
// by the store's clock (§6).

const (
	// sizeModulus: an object's size modulo sizeModulus is its size code.
	sizeModulus = 64
	// sizeReleased is added to the code of a released object.
	sizeReleased = 32
	// validityUnit is the unit of validity classes: class k bounds a
	// validity by 2^k units.
	validityUnit = 100 * time.Millisecond
	// maxValidityClass is the largest class (2^31 units is about 6.8
	// years, beyond maxForeignValidity).
	maxValidityClass = sizeReleased - 1
)

// validityClass returns the smallest k ≥ 1 with d ≤ 2^k validityUnits, or 0
// for no validity (a marker's).
func validityClass(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	k := 1
	for k < maxValidityClass && d > validityUnit<<k {
		k++
	}
	return k
}

// sizeCode is the size code of an epoch object whose payload is p.
func (p *payload) sizeCode() int {
	code := validityClass(p.validity())
	if p.Released {
		code += sizeReleased
	}
	return code
}

// padToSizeCode appends the spaces that give body the size code of p.
func padToSizeCode(body []byte, p *payload) []byte {
	n := (p.sizeCode() - len(body)%sizeModulus + sizeModulus) % sizeModulus
	return append(body, bytes.Repeat([]byte{' '}, n)...)
}

// sizeVerdict is what a listing's size and dates say of an epoch object.
type sizeVerdict int

const (
	// sizeUnknown: the listing cannot tell; read the object.
	sizeUnknown sizeVerdict = iota
	// sizeFree: released, or lapsed by the store's clock even if its
	// validity were the longest its class allows.
	sizeFree
	// sizeHeld: neither released nor lapsed, even if its validity were
	// the shortest its class allows.
	sizeHeld
)

// judgeListed judges a listed epoch object from its size, its Last-Modified
// and the listing's Date (the store's clock): free only when §6 would call
// it free whatever its validity within its class (released, or older than
// the class's bound plus serverSlack); held only when it is not released
// and younger than half the bound (the shortest validity of the class);
// else unknown. For a held one, soonest is the earliest its lease may lapse
// by the store's clock (Last-Modified + half the bound + serverSlack).
func judgeListed(e listedEpoch, date time.Time) (v sizeVerdict, soonest time.Time) {
	code := int(e.size % sizeModulus)
	class := code % sizeReleased
	switch {
	case e.size <= 0 || class == 0:
		return sizeUnknown, time.Time{} // not one of ours, or a marker
	case code >= sizeReleased:
		return sizeFree, time.Time{}
	case date.IsZero() || e.lastModified.IsZero():
		return sizeUnknown, time.Time{}
	}
	bound := validityUnit << class
	age := date.Sub(e.lastModified)
	switch {
	case age >= bound+serverSlack:
		return sizeFree, time.Time{}
	case age < bound/2:
		return sizeHeld, e.lastModified.Add(bound/2 + serverSlack)
	}
	return sizeUnknown, time.Time{}
}
