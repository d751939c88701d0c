package awsclient

import (
	"net/url"
	"testing"
)

// The NO_PROXY syntax of the S3 backend's no_proxy (that of Go's
// environment rules): domains with their subdomains, a leading dot for
// subdomains only, IP addresses, CIDR ranges, ports, "*".
func TestNoProxy_Matches(t *testing.T) {
	for _, tc := range []struct {
		list, target string
		want         bool
	}{
		{"example.com", "https://example.com", true},
		{"example.com", "https://s3.example.com", true},
		{"example.com", "https://badexample.com", false},
		{".example.com", "https://example.com", false},
		{".example.com", "https://s3.example.com", true},
		{"*.example.com", "https://s3.example.com", true},
		{"EXAMPLE.com", "https://S3.Example.COM", true},
		{"example.com:9000", "http://example.com:9000", true},
		{"example.com:9000", "http://example.com:9001", false},
		{"example.com:443", "https://example.com", true},
		{"10.0.0.0/8", "http://10.1.2.3:7070", true},
		{"10.0.0.0/8", "http://11.1.2.3:7070", false},
		{"127.0.0.1", "http://127.0.0.1:7070", true},
		{"127.0.0.1:7070", "http://127.0.0.1:7070", true},
		{"127.0.0.1:7070", "http://127.0.0.1:7071", false},
		{"::1", "http://[::1]:7070", true},
		{"[::1]:7070", "http://[::1]:7070", true},
		{"fd00::/8", "http://[fd12::1]:80", true},
		{"localhost, 127.0.0.1", "http://localhost:7070", true},
		{"*", "https://s3.amazonaws.com", true},
		{"", "https://s3.amazonaws.com", false},
		{"example.com", "http://127.0.0.1", false},
	} {
		n, err := parseNoProxy(tc.list, true)
		if err != nil {
			t.Fatalf("parseNoProxy(%q): %v", tc.list, err)
		}
		u, err := url.Parse(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.matches(u); got != tc.want {
			t.Errorf("no_proxy %q, %s: bypass %v, want %v", tc.list, tc.target, got, tc.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "exa*mple.com", "*.", ".", "172.16.*", "*.corp.*", "[fd00::]/8"} {
		if _, err := parseNoProxy(bad, true); err == nil {
			t.Errorf("parseNoProxy(%q) accepted it", bad)
		}
	}
}

// NO_PROXY from the environment is read as Go reads it: the entries of
// other tools' syntaxes are skipped, the others still apply.
func TestNoProxy_EnvironmentEntriesSkipped(t *testing.T) {
	const list = "172.16.*, *.corp.*, [fd00::]/8, 10.0.0.0/33, example.com, 192.168.0.0/16"
	if _, err := parseNoProxy(list, true); err == nil {
		t.Fatalf("the strict parse accepted %q", list)
	}
	n, err := parseNoProxy(list, false)
	if err != nil {
		t.Fatalf("parseNoProxy(%q) as NO_PROXY: %v", list, err)
	}
	for target, want := range map[string]bool{
		"https://s3.example.com": true, "http://192.168.4.5": true,
		"http://172.16.0.1": false, "https://s3.corp.example": false, "http://[fd00::1]": false,
	} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.matches(u); got != want {
			t.Errorf("NO_PROXY %q, %s: bypass %v, want %v", list, target, got, want)
		}
	}
}

// redact hides a proxy password whether or not the URL parses.
func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"http://user:hunter2@proxy:3128":           "http://user:xxxxx@proxy:3128",
		"http://user:hunter2@proxy:%zz":            "http://user:xxxxx@proxy:%zz",
		"http://us er:hun ter2@proxy:3128/x":       "http://us er:xxxxx@proxy:3128/x",
		"user:hunter2@proxy:3128":                  "user:xxxxx@proxy:3128",
		"http://user:p@ss:w@rd@proxy:3128/path@at": "http://user:xxxxx@proxy:3128/path@at",
		"http://user@proxy:3128":                   "http://user@proxy:3128",
		"http://proxy:3128":                        "http://proxy:3128",
		"::not a url":                              "::not a url",
	} {
		if got := redact(raw); got != want {
			t.Errorf("redact(%q) = %q, want %q", raw, got, want)
		}
	}
}
