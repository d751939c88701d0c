// Package textsafe makes text that s3lock did not write fit to print.
//
// Holder names, reasons, waiter names and lock info are validated when
// s3lock writes them, but anyone who may put objects under a lock's keys can
// write any bytes there, and a store's error messages are the store's. Such
// text reaches terminals (where an escape sequence can set the title,
// recolour or rewrite the screen) and CI logs (where a line that starts with
// "::error::" or "##vso[" is a command to the runner). Escape keeps it on
// one line and free of control sequences, and shows what was there.
package textsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Safe reports whether s prints as itself: valid UTF-8 whose runes are all
// graphic (letters, marks, numbers, punctuation, symbols, spaces) or joiners.
// Control characters (escape, carriage return, newline, tab) and the other
// format characters (bidirectional overrides, zero-width spaces) are not.
func Safe(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !shows(r) {
			return false
		}
	}
	return true
}

// shows reports whether r prints as itself: a graphic rune, or a zero-width
// joiner or non-joiner, which join emoji ("👨‍💻") and the letters of some
// scripts and move nothing on a line.
func shows(r rune) bool { return unicode.IsGraphic(r) || r == '\u200c' || r == '\u200d' }

// Escape returns s with every rune that does not show as itself written as
// a Go escape (`\x1b`, `\n`, `\u202e`; bytes that are not UTF-8 as `\xff`),
// and cut to at most max bytes (max <= 0: no cut), never inside a rune or an
// escape, with "…" appended. Text that is Safe and short enough is returned
// as is, so a backslash in ordinary text is not doubled; a name in which
// Escape changed something therefore shows escapes, which is the point: the
// reader sees that the text was not what s3lock writes.
func Escape(s string, max int) string {
	if Safe(s) && (max <= 0 || len(s) <= max) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+n]
		switch {
		case r == utf8.RuneError && n <= 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case !shows(r):
			q := strconv.QuoteRuneToASCII(r) // 'x' with x escaped
			piece = q[1 : len(q)-1]
		}
		if max > 0 && b.Len()+len(piece) > max {
			b.WriteString("…")
			break
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}
