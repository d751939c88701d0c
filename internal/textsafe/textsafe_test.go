package textsafe_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/s3lock/terraform-provider-s3lock/internal/textsafe"
)

func TestEscape_TextThatPrintsAsItselfIsKept(t *testing.T) {
	for _, s := range []string{"", "ci@runner-7:4242-a1b2", `C:\builds\x`, "Jürgen Wölk", "日本語 ✓", "::not at a line start", "deploy 👨\u200d💻", "می\u200cخواهم"} {
		if !textsafe.Safe(s) || textsafe.Escape(s, 0) != s {
			t.Errorf("Escape(%q) = %q, Safe = %v; want it kept", s, textsafe.Escape(s, 0), textsafe.Safe(s))
		}
	}
}

func TestEscape_ControlAndFormatCharactersAreShownAsEscapes(t *testing.T) {
	cases := map[string]string{
		"evil\x1b]0;pwned\a\x1b[31m\n::error::forged": `evil\x1b]0;pwned\a\x1b[31m\n::error::forged`,
		"a\r\nb\tc":                  `a\r\nb\tc`,
		"bidi \u202eevil":            `bidi \u202eevil`,
		"zero\u200bwidth":            `zero\u200bwidth`,
		"bad utf8 \xff\xfe":          `bad utf8 \xff\xfe`,
		"c1 \u009b31m":               `c1 \u009b31m`,
		"del \x7f":                   `del \x7f`,
		"backslash \\ beside \x1b[m": `backslash \ beside \x1b[m`,
	}
	for in, want := range cases {
		got := textsafe.Escape(in, 0)
		if got != want {
			t.Errorf("Escape(%q) = %q; want %q", in, got, want)
		}
		if textsafe.Safe(in) {
			t.Errorf("Safe(%q) = true", in)
		}
		if strings.IndexFunc(got, func(r rune) bool { return !unicode.IsGraphic(r) }) >= 0 {
			t.Errorf("Escape(%q) = %q still holds a character that is not graphic", in, got)
		}
	}
}

func TestEscape_CutsLongTextAtARuneBoundary(t *testing.T) {
	got := textsafe.Escape(strings.Repeat("é", 300), 256)
	if len(got) > 256+len("…") || !strings.HasSuffix(got, "…") || !textsafe.Safe(got) {
		t.Errorf("Escape(300 × é, 256) = %d bytes %q", len(got), got)
	}
	if got := textsafe.Escape("short", 256); got != "short" {
		t.Errorf("Escape(short) = %q", got)
	}
}

func TestEscape_NeverCutsAnEscapeInTwo(t *testing.T) {
	if got := textsafe.Escape(strings.Repeat("\x1b", 100), 10); got != `\x1b\x1b…` {
		t.Errorf("Escape(100 × ESC, 10) = %q; want two whole escapes and …", got)
	}
	if got := textsafe.Escape("ab\u202ecd", 7); got != `ab…` {
		t.Errorf("Escape(ab RLO cd, 7) = %q; want ab…", got)
	}
}
