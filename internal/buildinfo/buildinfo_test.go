package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersion_TheReleaseBuildsVersionWins(t *testing.T) {
	if got := Version("v0.1.0"); got != "v0.1.0" {
		t.Errorf("Version(%q) = %q, want it as linked", "v0.1.0", got)
	}
}

func TestVersion_WithoutOneTheModulesVersionAsGoRecordedIt(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("a test binary records its build info")
	}
	want := fromModule(info.Main.Version)
	if got := Version(""); got != want {
		t.Errorf("Version(\"\") = %q, want %q (the test binary's module version %q)", got, want, info.Main.Version)
	}
}

func TestFromModule(t *testing.T) {
	for recorded, want := range map[string]string{
		"v0.1.0":                               "v0.1.0",
		"v0.1.1-0.20261205010203-abcdef012345": "v0.1.1-0.20261205010203-abcdef012345",
		"(devel)":                              Unknown,
		"":                                     Unknown,
	} {
		if got := fromModule(recorded); got != want {
			t.Errorf("fromModule(%q) = %q, want %q", recorded, got, want)
		}
	}
}
