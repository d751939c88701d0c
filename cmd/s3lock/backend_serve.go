package main

import (
	"context"
	cryptotls "crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfhttp"
)

// Variables of backend serve's credentials.
const (
	envBackendUsername = "S3LOCK_BACKEND_USERNAME"
	envBackendPassword = "S3LOCK_BACKEND_PASSWORD"
)

// defaultListen is where backend serve listens unless told otherwise.
const defaultListen = "127.0.0.1:7480"

// maxCredentialsFile bounds a credentials file: one line.
const maxCredentialsFile = 4 << 10

const backendServeLong = `Serve Terraform's and OpenTofu's http backend for the states in --bucket until
stopped (SIGINT or SIGTERM): a sidecar in a CI job, or a laptop. Every state is
served at its own URL, http://LISTEN/state/KEY, where KEY is the state
object's key in the bucket (a workspace other than default: env:/WORKSPACE/KEY).
Point Terraform at one with

  terraform {
    backend "http" {}
  }

  export TF_HTTP_ADDRESS=http://127.0.0.1:7480/state/app/terraform.tfstate
  export TF_HTTP_LOCK_ADDRESS=$TF_HTTP_ADDRESS TF_HTTP_UNLOCK_ADDRESS=$TF_HTTP_ADDRESS
  export TF_HTTP_USERNAME=... TF_HTTP_PASSWORD=...   # the credentials below

(terraform_remote_state reads one with config = { address = ..., username =
..., password = ... }). Every request must carry the credentials, from
--credentials-file (one line USER:PASSWORD; keep it private) or from
S3LOCK_BACKEND_USERNAME and S3LOCK_BACKEND_PASSWORD. serve listens on loopback
only (default ` + defaultListen + `); to listen on another address, say so with
--allow-remote, and give --tls-cert and --tls-key: credentials never cross a
network in clear text.

Locks, waits and fenced writes are those of 'backend run' (see its help), with
one difference: serve cannot tell a client that died from one that is busy. A
lock stays held, and its lease renewed, until its client unlocks it, someone
force-unlocks it ('terraform force-unlock ID' with ?ID=ID added to
TF_HTTP_UNLOCK_ADDRESS: Terraform sends no ID of its own), serve stops (it
releases every lock it holds), or --max-hold passes (default: no limit); a
lock released so refuses its client's later writes. serve prints on stdout
the URL it serves, and on stderr the waits, refusals and lost locks.

Exit codes:
  0    stopped by SIGINT, SIGTERM or SIGHUP (every lock it held released)
  1    error: the store is unreachable, refused the credentials, has no such
       bucket; the address cannot be listened on; serving failed
  2    usage: bad flags, credentials or configuration`

func (a *app) backendServeCommand() *cobra.Command {
	var bf backendFlags
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve Terraform's http backend for the bucket's states until stopped",
		Long:  backendServeLong,
		Example: `  printf 'terraform:%s\n' "$(openssl rand -hex 16)" > ~/.s3lock-backend && chmod 600 ~/.s3lock-backend
  s3lock backend serve --bucket my-states --credentials-file ~/.s3lock-backend`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected arguments %q: serve serves every key of --bucket, at /state/KEY", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return a.backendServe(cmd.Context(), bf, sf) },
	}
	bf.register(cmd)
	sf.register(cmd)
	return cmd
}

// serveFlags are backend serve's own flags.
type serveFlags struct {
	listen, credentialsFile, tlsCert, tlsKey string
	allowRemote                              bool
	maxHold                                  time.Duration
}

func (sf *serveFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&sf.listen, "listen", defaultListen, "HOST:PORT to listen on; a loopback address unless --allow-remote (port 0: any free port)")
	fs.StringVar(&sf.credentialsFile, "credentials-file", "", "file with one line USER:PASSWORD that every request must carry "+
		"(else env "+envBackendUsername+" and "+envBackendPassword+")")
	fs.BoolVar(&sf.allowRemote, "allow-remote", false, "listen on an address other hosts can reach (needs --tls-cert and --tls-key)")
	fs.StringVar(&sf.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS with")
	fs.StringVar(&sf.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	durationFlag(fs, &sf.maxHold, "max-hold", 0, "release a lock held longer than this (a client that died holding it)", durationSpec{zero: "0: no limit"})
}

func (a *app) backendServe(ctx context.Context, bf backendFlags, sf serveFlags) error {
	if err := a.needBucket(); err != nil {
		return err
	}
	tls, err := sf.check()
	if err != nil {
		return err
	}
	creds, err := sf.credentials()
	if err != nil {
		return err
	}
	cfg, err := a.backendConfig(ctx, bf)
	if err != nil {
		return err
	}
	cfg.Credentials, cfg.MaxHold = creds, sf.maxHold
	srv, err := tfhttp.New(cfg)
	if err != nil {
		return err
	}
	if err := checkStore(ctx, cfg, "s3lock-backend-check"); err != nil {
		return err
	}
	l, err := net.Listen("tcp", sf.listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w; choose another --listen address or port", sf.listen, err)
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	base := scheme + "://" + l.Addr().String()
	fmt.Fprintln(a.stdout, base+tfhttp.StatePath)
	fmt.Fprintf(a.stderr, "s3lock backend: serving the Terraform states of s3://%s at %sKEY until stopped: set TF_HTTP_ADDRESS, "+
		"TF_HTTP_LOCK_ADDRESS and TF_HTTP_UNLOCK_ADDRESS to that URL, TF_HTTP_USERNAME and TF_HTTP_PASSWORD to the credentials\n",
		a.bucket, base+tfhttp.StatePath)
	served := make(chan error, 1)
	go func() {
		if tls {
			served <- srv.ServeTLS(l, sf.tlsCert, sf.tlsKey)
		} else {
			served <- srv.Serve(l)
		}
	}()
	var serveErr error
	select {
	case <-ctx.Done(): // SIGINT, SIGTERM, SIGHUP
	case serveErr = <-served:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		fmt.Fprintf(a.stderr, "s3lock backend: warning: %s; a lock not released lapses by itself within %s\n", oneLine(err.Error()), bf.lease)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serving on %s: %w", l.Addr(), serveErr)
	}
	return nil
}

// check refuses an address beyond loopback unless allowed, and then
// without TLS, and a certificate that does not load; it says whether to
// serve TLS.
func (sf serveFlags) check() (bool, error) {
	host, _, err := net.SplitHostPort(sf.listen)
	if err != nil {
		return false, usagef("--listen %q is not HOST:PORT: %v", sf.listen, err)
	}
	tls := sf.tlsCert != "" || sf.tlsKey != ""
	switch {
	case (sf.tlsCert == "") != (sf.tlsKey == ""):
		return false, usagef("--tls-cert and --tls-key go together")
	case tls:
		if _, err := cryptotls.LoadX509KeyPair(sf.tlsCert, sf.tlsKey); err != nil {
			return false, usagef("--tls-cert %s and --tls-key %s: %v", sf.tlsCert, sf.tlsKey, err)
		}
	}
	switch {
	case isLoopback(host):
		return tls, nil
	case !sf.allowRemote:
		return false, usagef("--listen %q is reachable beyond this host: serve listens on loopback (127.0.0.1, ::1, localhost) "+
			"unless --allow-remote is given, with --tls-cert and --tls-key", sf.listen)
	case !tls:
		return false, usagef("--allow-remote needs --tls-cert and --tls-key: the credentials must not cross a network in clear text")
	}
	return true, nil
}

// credentials reads the credentials every request must carry.
func (sf serveFlags) credentials() (tfhttp.Credentials, error) {
	if sf.credentialsFile != "" {
		return readCredentialsFile(sf.credentialsFile)
	}
	user, pass := os.Getenv(envBackendUsername), os.Getenv(envBackendPassword)
	if user == "" || pass == "" {
		return tfhttp.Credentials{}, usagef("no credentials: give --credentials-file FILE (one line USER:PASSWORD) or set %s and %s; "+
			"every request to the backend must carry them", envBackendUsername, envBackendPassword)
	}
	return checkCredentials(tfhttp.Credentials{Username: user, Password: pass}, envBackendUsername)
}

func readCredentialsFile(path string) (tfhttp.Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return tfhttp.Credentials{}, usagef("--credentials-file: %v", err)
	}
	defer f.Close()
	if err := privateFile(f); err != nil {
		return tfhttp.Credentials{}, usagef("--credentials-file %s: %v", path, err)
	}
	b := make([]byte, maxCredentialsFile+1)
	n, _ := f.Read(b)
	if n > maxCredentialsFile {
		return tfhttp.Credentials{}, usagef("--credentials-file %s is longer than one line USER:PASSWORD", path)
	}
	line := strings.TrimRight(string(b[:n]), "\r\n")
	user, pass, ok := strings.Cut(line, ":")
	if !ok || strings.ContainsAny(line, "\r\n") {
		return tfhttp.Credentials{}, usagef("--credentials-file %s must hold one line USER:PASSWORD", path)
	}
	return checkCredentials(tfhttp.Credentials{Username: user, Password: pass}, "--credentials-file "+path)
}

// checkCredentials refuses credentials too weak to guard an endpoint.
func checkCredentials(c tfhttp.Credentials, from string) (tfhttp.Credentials, error) {
	const minPassword = 16
	switch {
	case c.Username == "" || strings.ContainsRune(c.Username, ':'):
		return c, usagef("%s: the user name must be non-empty and without \":\"", from)
	case len(c.Password) < minPassword:
		return c, usagef("%s: the password is %d characters; use at least %d (e.g. openssl rand -hex 16)", from, len(c.Password), minPassword)
	}
	return c, nil
}
