package tfstate

import (
	"bytes"
	"strconv"
)

// The fence mark: what makes every state body written under an epoch
// differ from every body written under another (PROTOCOL.md §15).
//
// A Terraform state is a JSON document, and JSON ignores whitespace after
// its value. A body written under epoch e is the state with its trailing
// whitespace trimmed, then "\n", then e in binary, most significant bit
// first, space for 0 and tab for 1, then "\n". A placeholder (the lock's
// seal of a state that does not exist yet) is the mark alone. Every reader
// of JSON, Terraform's S3 backend included, reads a marked state as the
// state; Read gives Terraform the state without its mark.

// marked returns state with the mark of epoch (epoch ≥ 1); a nil or
// all-whitespace state gives the placeholder.
func marked(state []byte, epoch uint64) []byte {
	body := bytes.TrimRight(state, jsonSpace)
	out := make([]byte, 0, len(body)+markRoom)
	out = append(out, body...)
	if len(body) > 0 {
		out = append(out, '\n')
	}
	for _, bit := range strconv.FormatUint(epoch, 2) {
		if bit == '1' {
			out = append(out, '\t')
		} else {
			out = append(out, ' ')
		}
	}
	return append(out, '\n')
}

// unmarked returns the state a stored body holds: the body without its
// trailing whitespace (a mark, or Terraform's own newline), ending in one
// newline; nil for a placeholder or an empty object (no state).
func unmarked(body []byte) []byte {
	state := bytes.TrimRight(body, jsonSpace)
	if len(state) == 0 {
		return nil
	}
	return append(state[:len(state):len(state)], '\n')
}

// markEpoch returns the epoch a body's mark records, and false for a body
// without a mark (written by Terraform's S3 backend, or by hand).
func markEpoch(body []byte) (uint64, bool) {
	rest := bytes.TrimRight(body, jsonSpace)
	tail := body[len(rest):]
	if len(rest) > 0 {
		if len(tail) < 3 || tail[0] != '\n' {
			return 0, false
		}
		tail = tail[1:]
	}
	if len(tail) < 2 || tail[len(tail)-1] != '\n' || tail[0] != '\t' {
		return 0, false
	}
	var epoch uint64
	for _, c := range tail[:len(tail)-1] {
		if epoch > (1<<63)-1 {
			return 0, false
		}
		switch c {
		case ' ':
			epoch <<= 1
		case '\t':
			epoch = epoch<<1 | 1
		default:
			return 0, false
		}
	}
	return epoch, true
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\r\n"
