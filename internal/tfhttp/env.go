package tfhttp

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
)

// The environment variables Terraform's and OpenTofu's http backend read
// its settings from (`backend "http" {}` with nothing in the block): the
// one home of their names.
const (
	EnvAddress       = "TF_HTTP_ADDRESS"
	EnvUpdateMethod  = "TF_HTTP_UPDATE_METHOD"
	EnvLockAddress   = "TF_HTTP_LOCK_ADDRESS"
	EnvLockMethod    = "TF_HTTP_LOCK_METHOD"
	EnvUnlockAddress = "TF_HTTP_UNLOCK_ADDRESS"
	EnvUnlockMethod  = "TF_HTTP_UNLOCK_METHOD"
	EnvUsername      = "TF_HTTP_USERNAME"
	EnvPassword      = "TF_HTTP_PASSWORD"
)

// The methods the server takes, which are the http backend's defaults.
const (
	MethodLock   = "LOCK"
	MethodUnlock = "UNLOCK"
	MethodUpdate = "POST"
)

// StatePath is the path under which the server serves the state at a key:
// StatePath + KEY.
const StatePath = "/state/"

// StateURL is the URL of the state at key on the server at base
// ("http://127.0.0.1:PORT"): the address, lock address and unlock address
// Terraform is given.
func StateURL(base, key string) string {
	segments := strings.Split(key, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return strings.TrimSuffix(base, "/") + StatePath + strings.Join(segments, "/")
}

// Credentials are the basic-auth user and password every request must
// carry.
type Credentials struct {
	Username, Password string
}

// RandomCredentials draws credentials for one run: nobody else learns them,
// so no other process on the host can use its endpoint.
func RandomCredentials() Credentials {
	return Credentials{Username: "s3lock-" + randomHex(4), Password: randomHex(24)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Environ returns the TF_HTTP_* variables that point Terraform's http
// backend at the state at key on the server at base, as NAME=VALUE entries.
func Environ(base, key string, c Credentials) []string {
	u := StateURL(base, key)
	return []string{
		EnvAddress + "=" + u, EnvUpdateMethod + "=" + MethodUpdate,
		EnvLockAddress + "=" + u, EnvLockMethod + "=" + MethodLock,
		EnvUnlockAddress + "=" + u, EnvUnlockMethod + "=" + MethodUnlock,
		EnvUsername + "=" + c.Username, EnvPassword + "=" + c.Password,
	}
}

// Names lists the variables Environ sets, for a caller that must remove
// other values of them from an environment first.
func Names() []string {
	return []string{EnvAddress, EnvUpdateMethod, EnvLockAddress, EnvLockMethod, EnvUnlockAddress, EnvUnlockMethod, EnvUsername, EnvPassword}
}
