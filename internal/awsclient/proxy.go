package awsclient

import (
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
// proxy. When one is set, the rules below apply instead, with the same
// environment fallbacks and the same NO_PROXY syntax, but to every host:
// whoever names a proxy explicitly means every request not excluded by
// no_proxy (and a store or STS endpoint on 127.0.0.1 behind a proxy is a
// real setup, tunnels and sidecars among them). To keep loopback requests
// direct, name them in no_proxy.

// proxyRules are the proxies of the explicit settings.
type proxyRules struct {
	http, https *url.URL // nil: direct
	bypass      noProxy
}

// proxyRules returns the rules of the explicit proxy settings, each falling
// back to its environment variable; nil when none is set.
func (o Options) proxyRules() (*proxyRules, error) {
	if o.HTTPProxy == "" && o.HTTPSProxy == "" && o.NoProxy == "" {
		return nil, nil
	}
	var r proxyRules
	var err error
	if r.http, err = parseProxy("HTTP proxy", orEnv(o.HTTPProxy, "HTTP_PROXY", "http_proxy")); err != nil {
		return nil, err
	}
	if r.https, err = parseProxy("HTTPS proxy", orEnv(o.HTTPSProxy, "HTTPS_PROXY", "https_proxy")); err != nil {
		return nil, err
	}
	if r.bypass, err = parseNoProxy(orEnv(o.NoProxy, "NO_PROXY", "no_proxy")); err != nil {
		return nil, err
	}
	return &r, nil
}

func (o Options) validateProxies() error {
	_, err := o.proxyRules()
	return err
}

// ValidateProxy checks a proxy URL: http, https or socks5, with a host
// ("host:port" reads as http://host:port).
func ValidateProxy(raw string) error {
	_, err := parseProxy("proxy", raw)
	return err
}

// ValidateNoProxy checks a no-proxy list.
func ValidateNoProxy(list string) error {
	_, err := parseNoProxy(list)
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

func orEnv(v string, envs ...string) string {
	for _, e := range envs {
		if v != "" {
			break
		}
		v = os.Getenv(e)
	}
	return v
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

// redact hides the password of a proxy URL in errors.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return raw
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
// or "*" for every host.
func parseNoProxy(list string) (noProxy, error) {
	var n noProxy
	for _, entry := range strings.Split(list, ",") {
		e := strings.ToLower(strings.TrimSpace(entry))
		switch {
		case e == "":
			continue
		case e == "*":
			n.all = true
			continue
		case strings.Contains(e, "/"):
			_, ipNet, err := net.ParseCIDR(e)
			if err != nil {
				return noProxy{}, fmt.Errorf("no-proxy entry %q is not a CIDR range such as 10.0.0.0/8", entry)
			}
			n.nets = append(n.nets, ipNet)
			continue
		}
		host, port := e, ""
		if h, p, err := net.SplitHostPort(e); err == nil {
			host, port = h, p
		}
		host = strings.Trim(host, "[]")
		if ip := net.ParseIP(host); ip != nil {
			n.ips = append(n.ips, hostPort{ip: ip, port: port})
			continue
		}
		rule := domainRule{name: host, self: true, port: port}
		if strings.HasPrefix(rule.name, "*.") {
			rule.name = rule.name[1:]
		}
		if strings.HasPrefix(rule.name, ".") {
			rule.name, rule.self = rule.name[1:], false
		}
		if rule.name == "" || strings.ContainsAny(rule.name, " *:") {
			return noProxy{}, fmt.Errorf("no-proxy entry %q is not a domain name, IP address or CIDR range", entry)
		}
		n.domains = append(n.domains, rule)
	}
	return n, nil
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
