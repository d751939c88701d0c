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
		n, err := parseNoProxy(tc.list)
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
	for _, bad := range []string{"10.0.0.0/33", "exa*mple.com", "*.", "."} {
		if _, err := parseNoProxy(bad); err == nil {
			t.Errorf("parseNoProxy(%q) accepted it", bad)
		}
	}
}
