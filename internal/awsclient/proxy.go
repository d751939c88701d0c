package awsclient

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// The proxy settings (the S3 backend's http_proxy, https_proxy, no_proxy).
//
// Without any of them, the HTTP transport keeps Go's own rules
// (http.ProxyFromEnvironment): HTTP_PROXY, HTTPS_PROXY and NO_PROXY, except
// that requests to localhost and loopback addresses never go through a
// proxy. When one is set, the rules below apply instead, those of the S3
// backend (aws-sdk-go-base's HTTPProxyModeLegacy):
//
//   - a proxy that is not set falls back to its environment variable
//     (HTTP_PROXY or http_proxy, HTTPS_PROXY or https_proxy); one set to ""
//     means none, whatever the environment says;
//   - HTTPProxy alone also carries https:// requests, unless HTTPSProxy or
//     HTTPS_PROXY is set (the backend warns that it does);
//   - an empty NoProxy falls back to NO_PROXY (or no_proxy); the entries of
//     the variable that this syntax does not read (172.16.*, [fd00::]/8) are
//     ignored, as Go ignores them, while a malformed NoProxy is an error;
//   - the rules (with Go's NO_PROXY syntax) apply to every host, loopback
//     included: whoever names a proxy explicitly means every request not
//     excluded by no_proxy (and a store or STS endpoint on 127.0.0.1 behind
//     a proxy is a real setup, tunnels and sidecars among them). To keep
//     loopback requests direct, name them in no_proxy. This is where the
//     rules part from the backend's, whose Go proxy rules
//     (golang.org/x/net/http/httpproxy) never proxy loopback hosts, and why
//     this file does not use that package.

// Environment variables of the proxies, in the order Go reads them.
var (
	envHTTPProxy  = []string{"HTTP_PROXY", "http_proxy"}
	envHTTPSProxy = []string{"HTTPS_PROXY", "https_proxy"}
	envNoProxy    = []string{"NO_PROXY", "no_proxy"}
)

// proxyRules are the proxies of the explicit settings.
type proxyRules struct {
	http, https *url.URL // nil: direct
	bypass      noProxy
}

// proxyRules returns the rules of the explicit proxy settings, with the
// environment's where they are not set; nil when none is set.
func (o Options) proxyRules() (*proxyRules, error) {
	if o.HTTPProxy == nil && o.HTTPSProxy == nil && o.NoProxy == "" {
		return nil, nil
	}
	httpRaw, httpWhat := setOrEnv(o.HTTPProxy, "HTTP proxy", envHTTPProxy)
	httpsRaw, httpsWhat := setOrEnv(o.HTTPSProxy, "HTTPS proxy", envHTTPSProxy)
	if o.HTTPSProxy == nil && httpsRaw == "" && o.HTTPProxy != nil {
		// The legacy mode: http_proxy alone is the proxy of both.
		httpsRaw, httpsWhat = *o.HTTPProxy, "HTTP proxy"
	}
	var r proxyRules
	var err error
	if r.http, err = parseProxy(httpWhat, httpRaw); err != nil {
		return nil, err
	}
	if r.https, err = parseProxy(httpsWhat, httpsRaw); err != nil {
		return nil, err
	}
	if o.NoProxy != "" {
		r.bypass, err = parseNoProxy(o.NoProxy, true)
	} else {
		list, _ := envValue(envNoProxy)
		r.bypass, err = parseNoProxy(list, false)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (o Options) validateProxies() error {
	_, err := o.proxyRules()
	return err
}

// ValidateProxy checks a proxy URL: http, https or socks5, with a host
// ("host:port" reads as http://host:port); empty is no proxy.
func ValidateProxy(raw string) error {
	_, err := parseProxy("proxy", raw)
	return err
}

// ValidateNoProxy checks a no-proxy list.
func ValidateNoProxy(list string) error {
	_, err := parseNoProxy(list, true)
	return err
}

// proxy is the transport's Proxy function: the proxy of the request's
// scheme, unless no_proxy names its host.
func (r *proxyRules) proxy(req *http.Request) (*url.URL, error) {
	p := r.http
	if req.URL.Scheme == "https" {
		p = r.https
	}
	if p == nil || r.bypass.matches(req.URL) {
		return nil, nil
	}
	return p, nil
}

// setOrEnv is a proxy setting's value and what to call it in errors: the
// setting's when it is set, else the first of envs that is.
func setOrEnv(v *string, setting string, envs []string) (value, what string) {
	if v != nil {
		return *v, setting
	}
	return envValue(envs)
}

// envValue is the value of the first of envs that is set, and its name.
func envValue(envs []string) (value, name string) {
	for _, e := range envs {
		if v := os.Getenv(e); v != "" {
			return v, e
		}
	}
	return "", ""
}

// parseProxy parses a proxy URL; like Go's environment rules it reads
// "host:port" as http://host:port. Empty is no proxy.
func parseProxy(what, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, nil
	}
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%s %q is not a URL such as http://proxy.example.com:3128", what, redact(raw))
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("%s %q has scheme %q: use http, https or socks5", what, redact(raw), u.Scheme)
	}
	return u, nil
}

// redact hides the password of a proxy URL for errors, whether or not the
// URL parses: everything between the first ":" of the user information and
// its "@" (the last one before the path) becomes "xxxxx", as url.Redacted
// writes it.
func redact(raw string) string {
	rest, scheme := raw, ""
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + user + ":xxxxx" + rest[at:]
}

// noProxy is a parsed NO_PROXY list.
type noProxy struct {
	all     bool // "*"
	nets    []*net.IPNet
	ips     []hostPort
	domains []domainRule
}

type hostPort struct {
	ip   net.IP
	port string // empty: any
}

type domainRule struct {
	name string // without a leading dot
	// self also matches the name itself, not only its subdomains
	// ("example.com" does, ".example.com" and "*.example.com" do not).
	self bool
	port string // empty: any
}

// parseNoProxy parses a comma-separated list of hosts: domain names (with
// their subdomains), IP addresses, CIDR ranges, each with an optional port,
// or "*" for every host. Strict, an entry it cannot read is an error;
// otherwise (NO_PROXY) it is skipped, as Go's rules skip it.
func parseNoProxy(list string, strict bool) (noProxy, error) {
	var n noProxy
	for _, entry := range strings.Split(list, ",") {
		e := strings.ToLower(strings.TrimSpace(entry))
		if e == "" {
			continue
		}
		if err := n.add(e); err != nil {
			if strict {
				return noProxy{}, fmt.Errorf("no-proxy entry %q %w", entry, err)
			}
			continue
		}
	}
	return n, nil
}

// add adds one entry (trimmed, lower case) to n, or says why it cannot.
func (n *noProxy) add(e string) error {
	if e == "*" {
		n.all = true
		return nil
	}
	if strings.Contains(e, "/") {
		_, ipNet, err := net.ParseCIDR(e)
		if err != nil {
			return errors.New("is not a CIDR range such as 10.0.0.0/8")
		}
		n.nets = append(n.nets, ipNet)
		return nil
	}
	host, port := e, ""
	if h, p, err := net.SplitHostPort(e); err == nil {
		host, port = h, p
	}
	host = strings.Trim(host, "[]")
	if ip := net.ParseIP(host); ip != nil {
		n.ips = append(n.ips, hostPort{ip: ip, port: port})
		return nil
	}
	rule := domainRule{name: host, self: true, port: port}
	if strings.HasPrefix(rule.name, "*.") {
		rule.name = rule.name[1:]
	}
	if strings.HasPrefix(rule.name, ".") {
		rule.name, rule.self = rule.name[1:], false
	}
	if rule.name == "" || strings.ContainsAny(rule.name, " *:[]") {
		return errors.New("is not a domain name, IP address or CIDR range")
	}
	n.domains = append(n.domains, rule)
	return nil
}

// matches reports whether u's host is to be reached without a proxy.
func (n noProxy) matches(u *url.URL) bool {
	if n.all {
		return true
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if ip := net.ParseIP(host); ip != nil {
		for _, ipNet := range n.nets {
			if ipNet.Contains(ip) {
				return true
			}
		}
		for _, hp := range n.ips {
			if hp.ip.Equal(ip) && (hp.port == "" || hp.port == port) {
				return true
			}
		}
		return false
	}
	for _, d := range n.domains {
		if d.port != "" && d.port != port {
			continue
		}
		if (d.self && host == d.name) || strings.HasSuffix(host, "."+d.name) {
			return true
		}
	}
	return false
}
