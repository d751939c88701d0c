package awsclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go/middleware"
)

// envCABundle is the AWS SDKs' variable for a CA bundle, which the S3
// backend's custom_ca_bundle falls back to.
const envCABundle = "AWS_CA_BUNDLE"

// httpClient builds the HTTP client of every AWS client: timeouts, TLS
// (insecure) and proxies. It also returns the CA bundle to hand to the SDK
// (nil: none), read and checked here so that a wrong file is reported with
// its name; the SDK puts it into the client's transport.
func (o Options) httpClient() (*awshttp.BuildableClient, io.Reader, error) {
	connect := orDefault(o.ConnectTimeout, DefaultConnectTimeout)
	response := orDefault(o.ResponseTimeout, DefaultResponseTimeout)
	rules, err := o.proxyRules()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	bundle, err := o.caBundle()
	if err != nil {
		return nil, nil, err
	}
	client := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = connect }).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = connect
			t.ResponseHeaderTimeout = response
			if rules != nil {
				t.Proxy = rules.proxy
			}
			if o.Insecure {
				if t.TLSClientConfig == nil {
					t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
				}
				t.TLSClientConfig.InsecureSkipVerify = true
			}
		})
	return client, bundle, nil
}

// caBundle reads the custom CA bundle (Resolved fills it from AWS_CA_BUNDLE)
// and checks that it holds certificates.
func (o Options) caBundle() (io.Reader, error) {
	name, what := o.CustomCABundle, "custom CA bundle"
	if o.caBundleFromEnv {
		what = envCABundle
	}
	if name == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q cannot be read: %w", ErrInvalidOptions, what, name, unwrapPathError(err))
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s %q holds no PEM certificate: give a file of \"-----BEGIN CERTIFICATE-----\" "+
			"blocks, the certificates of the CAs the endpoints' certificates chain to", ErrInvalidOptions, what, name)
	}
	return bytes.NewReader(pem), nil
}

// retryer returns the retryer of mode with the attempt and backoff limits.
func (o Options) retryer(mode string) func() aws.Retryer {
	attempts := o.MaxAttempts
	if attempts == 0 {
		attempts = DefaultMaxAttempts
	}
	backoff := orDefault(o.MaxBackoff, DefaultMaxBackoff)
	limits := func(so *retry.StandardOptions) {
		so.MaxAttempts = attempts
		so.MaxBackoff = backoff
	}
	if mode == RetryModeAdaptive {
		return func() aws.Retryer {
			return retry.NewAdaptiveMode(func(ao *retry.AdaptiveModeOptions) {
				ao.StandardOptions = append(ao.StandardOptions, limits)
			})
		}
	}
	return func() aws.Retryer { return retry.NewStandard(limits) }
}

// retryModeSource is a configuration source that may name a retry mode: the
// SDK's EnvConfig (AWS_RETRY_MODE) and SharedConfig (retry_mode).
type retryModeSource interface {
	GetRetryMode(context.Context) (aws.RetryMode, bool, error)
}

// setRetryer switches cfg to the adaptive retryer when RetryMode, or else
// the environment or the shared config, asks for it. (The loaders set the
// standard one: a retryer given to the SDK makes it ignore those sources.)
func (o Options) setRetryer(ctx context.Context, cfg *aws.Config) error {
	mode := o.RetryMode
	for _, src := range cfg.ConfigSources {
		if mode != "" {
			break
		}
		if s, ok := src.(retryModeSource); ok {
			m, found, err := s.GetRetryMode(ctx)
			if err != nil {
				return fmt.Errorf("%w: retry mode: %w", ErrInvalidOptions, err)
			}
			if found {
				mode = string(m)
			}
		}
	}
	if mode == RetryModeAdaptive {
		cfg.Retryer = o.retryer(mode)
	}
	return nil
}

// CertificateError is a request refused because the endpoint's TLS
// certificate is signed by a CA the client does not trust, the usual state
// of a store with a self-signed or private-CA certificate.
type CertificateError struct {
	Err error
}

func (e *CertificateError) Error() string {
	return e.Err.Error() + " (the endpoint's TLS certificate is not signed by a CA this machine trusts: " +
		"give the certificate of the CA that signed it as custom CA bundle, e.g. in " + envCABundle + ")"
}

func (e *CertificateError) Unwrap() error { return e.Err }

// certificateHint adds CertificateError's remedy to the errors of requests
// refused for an unknown certificate authority, on every client.
func certificateHint(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("S3lockCertificateHint",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
			middleware.InitializeOutput, middleware.Metadata, error,
		) {
			out, md, err := next.HandleInitialize(ctx, in)
			var unknown x509.UnknownAuthorityError
			var already *CertificateError
			if err != nil && errors.As(err, &unknown) && !errors.As(err, &already) {
				err = &CertificateError{Err: err}
			}
			return out, md, err
		}), middleware.Before)
}
