package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Environment variables read by s3lock, besides the standard AWS ones.
const (
	envBucket       = "S3LOCK_BUCKET"
	envEndpoint     = "S3LOCK_ENDPOINT"
	envPathStyle    = "S3LOCK_USE_PATH_STYLE"
	envHolder       = "S3LOCK_HOLDER"
	envToken        = runenv.Token
	envBucketOwner  = "S3LOCK_EXPECTED_BUCKET_OWNER"
	envRegionS3Lock = "S3LOCK_REGION"
	envEncrypt      = "S3LOCK_ENCRYPT"
	envKMSKeyID     = "S3LOCK_KMS_KEY_ID"
	envSSECKey      = "S3LOCK_SSE_CUSTOMER_KEY"
	envACL          = "S3LOCK_ACL"
)

// Defaults and timing of the command-line tool. The SDK's defaults are for
// programs that live as long as their lease; these are for shell steps. The
// watchdog's own timing (Linux only) is with it in watchdog_linux.go.
const (
	// defaultWait is how long run and acquire wait for a held lock: long
	// enough to queue behind another pipeline's short step, short enough that
	// a stuck holder fails the job rather than hanging it until the CI
	// timeout. --wait 0 tries once.
	defaultWait = 5 * time.Minute
	// defaultRunLease is the lease of `s3lock run`, renewed in the
	// background every third of it: a crashed runner blocks others for a
	// minute.
	defaultRunLease = s3lock.DefaultLeaseDuration
	// defaultTokenLease is the lease of `s3lock acquire`: nothing renews it
	// between pipeline steps unless they call `s3lock renew`, so it must
	// cover the steps until release.
	defaultTokenLease = 10 * time.Minute
	// defaultGrace caps how long before its lease could run out run sends a
	// command SIGTERM when renewals keep failing (by default a quarter of
	// the lease, see defaultGraceShare).
	defaultGrace = 10 * time.Second
	// defaultGraceShare: the default grace is a quarter of the lease, so
	// SIGTERM comes only once the renewals due at a third and at two thirds
	// of the lease have both failed.
	defaultGraceShare = 4
	// releaseTimeout bounds the release after the command has exited (or
	// s3lock was interrupted): a release that cannot be confirmed leaves the
	// lease to lapse.
	releaseTimeout = 30 * time.Second
	// runWatchInterval is how often run checks the lease's deadline for
	// SIGTERM and tells the watchdog a renewed deadline: a renewal reaches the
	// watchdog at most this late, far inside the third of a lease between two
	// renewals.
	runWatchInterval = 50 * time.Millisecond
	// groupKillLimit bounds how long run waits for the command's process
	// group to die after SIGKILL before it releases the lease.
	groupKillLimit = 5 * time.Second
	// plainInterval is how often a wait that changes nothing is reported
	// when stderr is not a terminal: often enough to show a CI log is
	// alive, rarely enough not to flood it.
	plainInterval = 5 * time.Second
)

// app is one invocation of the tool.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	// Connection flags (persistent on the root command).
	bucket      string
	endpoint    string
	pathStyle   bool
	region      string
	profile     string
	bucketOwner string
	objects     awsclient.ObjectSettings // encryption and ACL of the objects written
	debug       bool
	statsOn     bool

	// conn holds the other connection flags (TLS, proxies, STS, retries,
	// the S3 backend's skip_* switches, see connection.go); assumeRole and
	// webIdentity the role flags, used when useAssumeRole or useWebIdentity
	// says one of them (or its variable) is set.
	conn                          awsclient.Options
	assumeRole                    awsclient.AssumeRole
	webIdentity                   awsclient.WebIdentity
	useAssumeRole, useWebIdentity bool

	stats *stats // --stats: counts what the client does; nil without

	ran bool // a command's RunE started: its errors are not usage errors

	sigMu    sync.Mutex
	onSignal func(os.Signal) // nil: cancel the command's context
	cancel   context.CancelCauseFunc
	signals  chan os.Signal
	stopTrap chan struct{}
	trapWG   sync.WaitGroup
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr}
}

// execute runs the command line args and returns the exit code.
func (a *app) execute(args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	a.cancel = cancel
	a.trapSignals()
	defer a.untrapSignals()

	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	// The summary comes before the error, which stays the last line.
	a.printStats()
	if err == nil {
		return exitOK
	}
	code, hint := classify(ctx, err)
	if !a.ran {
		// Cobra's own errors: unknown command or flag, bad flag value.
		var ee *exitErr
		if !errors.As(err, &ee) {
			code, hint = exitUsage, true
		}
	}
	var ee *exitErr
	if errors.As(err, &ee) && ee.err == nil {
		return code // the message was printed already
	}
	if cmd == nil {
		cmd = root
	}
	msg := cmd.CommandPath() + ": " + strings.TrimPrefix(oneLine(err.Error()), "s3lock: ")
	if hint {
		msg += " (see '" + cmd.CommandPath() + " --help')"
	}
	fmt.Fprintln(a.stderr, msg)
	return code
}

// printStats prints the --stats summary, if asked for.
func (a *app) printStats() {
	if a.stats != nil {
		a.stats.print(a.stderr, time.Now())
	}
}

// trapSignals routes SIGINT, SIGTERM and SIGHUP to the current handler: by
// default they cancel the command's context; `s3lock run` forwards them to
// its command while that runs.
func (a *app) trapSignals() {
	a.signals = make(chan os.Signal, 4)
	a.stopTrap = make(chan struct{})
	signal.Notify(a.signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	a.trapWG.Add(1)
	go func() {
		defer a.trapWG.Done()
		for {
			select {
			case <-a.stopTrap:
				return
			case sig := <-a.signals:
				a.sigMu.Lock()
				h := a.onSignal
				a.sigMu.Unlock()
				if h != nil {
					h(sig)
				} else {
					a.cancel(signalErr{sig})
				}
			}
		}
	}()
}

// untrapSignals stops the router. The signals stay caught (and are now
// dropped) until the process exits, so one that arrives while s3lock exits
// cannot replace the exit code it is about to return.
func (a *app) untrapSignals() {
	close(a.stopTrap)
	a.trapWG.Wait()
}

// setSignalHandler makes h receive the signals (nil: cancel the context).
func (a *app) setSignalHandler(h func(os.Signal)) {
	a.sigMu.Lock()
	a.onSignal = h
	a.sigMu.Unlock()
}

const rootLong = `s3lock holds locks in an S3 bucket (or any S3-compatible store that enforces
conditional writes). A lock is a name; each time it is acquired it gets a new
epoch, a number that only grows: pass it to what the lock protects as a
fencing token. A lease lasts --lease unless renewed; a holder that crashes
blocks others only until its lease lapses.

Configuration comes from flags, else from the environment:
  --bucket                 S3LOCK_BUCKET
  --endpoint               S3LOCK_ENDPOINT (else AWS_ENDPOINT_URL_S3, AWS's own)
  --use-path-style         S3LOCK_USE_PATH_STYLE (true/false)
  --region                 S3LOCK_REGION, AWS_REGION, AWS_DEFAULT_REGION, the profile
  --profile                AWS_PROFILE
  --expected-bucket-owner  S3LOCK_EXPECTED_BUCKET_OWNER
  --holder                 S3LOCK_HOLDER (else user@host:pid plus a random suffix)
  --encrypt                S3LOCK_ENCRYPT (true/false)
  --kms-key-id             S3LOCK_KMS_KEY_ID
  --sse-customer-key       S3LOCK_SSE_CUSTOMER_KEY (better there: a flag shows in ps)
  --acl                    S3LOCK_ACL
The last four are Terraform's S3 backend settings encrypt, kms_key_id,
sse_customer_key and acl: for buckets whose policy denies unencrypted writes
or requires an ACL such as bucket-owner-full-control.

Credentials come from the standard AWS chain: AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_ROLE_ARN with
AWS_WEB_IDENTITY_TOKEN_FILE (web identity), the shared credentials and config
files (SSO and assumed-role profiles included), ECS and EC2 roles.

The other connection flags are Terraform's S3 backend settings of the same
names (see --help of any command for all of them), with these variables:
  --custom-ca-bundle        AWS_CA_BUNDLE: for a store with a private CA
  --insecure                S3LOCK_INSECURE (true/false)
  --https-proxy, --http-proxy, --no-proxy
                            HTTPS_PROXY, HTTP_PROXY, NO_PROXY
  --web-identity-role-arn, --web-identity-token-file, --web-identity-session-name
                            AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE,
                            AWS_ROLE_SESSION_NAME; --web-identity-token also
                            S3LOCK_WEB_IDENTITY_TOKEN
  --assume-role-arn, --assume-role-session-name, --assume-role-external-id
                            S3LOCK_ASSUME_ROLE_ARN, S3LOCK_ASSUME_ROLE_SESSION_NAME,
                            S3LOCK_ASSUME_ROLE_EXTERNAL_ID
  --sts-endpoint, --sts-region, --sso-endpoint
                            AWS_ENDPOINT_URL_STS, S3LOCK_STS_REGION,
                            AWS_ENDPOINT_URL_SSO
  --shared-config-files, --shared-credentials-files
                            AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE
  --retry-mode              AWS_RETRY_MODE (standard or adaptive)
  --use-fips-endpoint, --use-dualstack-endpoint
                            AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT
  --skip-metadata-api-check AWS_EC2_METADATA_DISABLED
  --skip-region-validation  S3LOCK_SKIP_REGION_VALIDATION
  --skip-s3-checksum        S3LOCK_SKIP_S3_CHECKSUM: for stores that reject
                            the AWS SDK's flexible checksum headers
                            (x-amz-checksum-*); DeleteObjects, whose checksum
                            S3 requires, then sends Content-MD5 instead
A flag given wins over the variables of its setting and of the settings it
excludes. With a web identity flag, s3lock assumes that role first; with an
assume-role flag, it then assumes that role with the credentials it has.
As in Terraform's S3 backend, --http-proxy alone also carries https://
requests unless --https-proxy or HTTPS_PROXY is set, and --https-proxy ""
sends them directly whatever HTTPS_PROXY says. Once a proxy flag is given,
the proxies also carry requests to localhost and loopback addresses, which
the proxy variables alone never do: list those in --no-proxy to reach them
directly. NO_PROXY entries of other syntaxes (172.16.*) are ignored; a
malformed --no-proxy is an error. --use-fips-endpoint=false,
--use-dualstack-endpoint=false and --skip-metadata-api-check=false override
their AWS variables.

Progress goes to stderr; stdout carries only machine-readable output (tokens,
JSON, tables), so it can be captured. With --stats, s3lock also prints a
summary on stderr when it exits: how long it waited, the epoch it acquired,
renewals, how the lease ended, and its S3 requests by operation and outcome.

` + exitCodesHelp

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "s3lock",
		Short:         "Locks held in an S3 bucket, for shell steps and pipelines",
		Long:          rootLong,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: help on stderr and exit 2 (--help: stdout, 0).
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return exitWith(exitUsage, nil)
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.ran = true
			if a.statsOn {
				a.stats = newStats(time.Now())
			}
			return a.resolveEnv(cmd)
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &exitErr{code: exitUsage, err: err, hint: true}
	})
	root.CompletionOptions.HiddenDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.bucket, "bucket", "", "bucket that holds the locks (env "+envBucket+")")
	pf.StringVar(&a.endpoint, "endpoint", "", "URL of an S3-compatible store, e.g. http://127.0.0.1:7070 (env "+envEndpoint+")")
	pf.BoolVar(&a.pathStyle, "use-path-style", false, "address the bucket in the path, as most S3-compatible stores need (env "+envPathStyle+")")
	pf.StringVar(&a.region, "region", "", "AWS region of the bucket (env "+envRegionS3Lock+", AWS_REGION)")
	pf.StringVar(&a.profile, "profile", "", "profile of the shared AWS config files (env AWS_PROFILE)")
	pf.StringVar(&a.bucketOwner, "expected-bucket-owner", "", "fail unless the bucket belongs to this AWS account id (env "+envBucketOwner+")")
	pf.BoolVar(&a.objects.Encrypt, "encrypt", false, "encrypt the objects s3lock writes: SSE-S3, or SSE-KMS with --kms-key-id (env "+envEncrypt+")")
	pf.StringVar(&a.objects.KMSKeyID, "kms-key-id", "", "KMS key (ID, ARN or alias) for SSE-KMS; needs --encrypt (env "+envKMSKeyID+")")
	pf.StringVar(&a.objects.SSECustomerKey, "sse-customer-key", "", "SSE-C key, the base64 of 32 bytes, sent with every write and read; "+
		"prefer env "+envSSECKey+": a flag's value shows in ps (excludes --encrypt)")
	pf.StringVar(&a.objects.ACL, "acl", "", "canned ACL for the objects s3lock writes, e.g. bucket-owner-full-control (env "+envACL+")")
	a.connectionFlags(pf)
	pf.BoolVar(&a.debug, "debug", false, "log the SDK's lock events (acquired, renewed, released, waiting, cleanup) to stderr")
	pf.BoolVar(&a.statsOn, "stats", false, "on exit, print a summary on stderr: how long s3lock waited, the epoch it acquired, renewals, how the lease ended, and the S3 requests by operation and outcome")

	root.AddCommand(
		a.runCommand(),
		a.acquireCommand(),
		a.renewCommand(),
		a.releaseCommand(),
		a.statusCommand(),
		a.watchCommand(),
		a.forceReleaseCommand(),
		a.verifyCommand(),
	)
	return root
}

// resolveEnv fills the connection flags that were not given from the
// environment.
func (a *app) resolveEnv(cmd *cobra.Command) error {
	flags := cmd.Flags()
	fromEnv(flags, &a.bucket, "bucket", envBucket)
	fromEnv(flags, &a.endpoint, "endpoint", envEndpoint)
	fromEnv(flags, &a.region, "region", envRegionS3Lock) // AWS_REGION is read by the SDK
	fromEnv(flags, &a.bucketOwner, "expected-bucket-owner", envBucketOwner)
	fromEnv(flags, &a.objects.KMSKeyID, "kms-key-id", envKMSKeyID)
	fromEnv(flags, &a.objects.SSECustomerKey, "sse-customer-key", envSSECKey)
	fromEnv(flags, &a.objects.ACL, "acl", envACL)
	if err := boolFromEnv(flags, &a.pathStyle, "use-path-style", envPathStyle); err != nil {
		return err
	}
	if err := boolFromEnv(flags, &a.objects.Encrypt, "encrypt", envEncrypt); err != nil {
		return err
	}
	if f := flags.Lookup("holder"); f != nil && !f.Changed {
		if v := os.Getenv(envHolder); v != "" {
			if err := f.Value.Set(v); err != nil {
				return err
			}
		}
	}
	return a.resolveConnectionEnv(flags)
}

// fromEnv sets *p from the first of envs that is set, unless flag was given.
func fromEnv(flags *pflag.FlagSet, p *string, flag string, envs ...string) {
	if flags.Changed(flag) {
		return
	}
	for _, e := range envs {
		if v := os.Getenv(e); v != "" {
			*p = v
			return
		}
	}
}

// boolFromEnv sets *p from env, unless flag was given.
func boolFromEnv(flags *pflag.FlagSet, p *bool, flag, env string) error {
	if flags.Changed(flag) {
		return nil
	}
	if v := os.Getenv(env); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return usagef("%s=%q is not true or false", env, v)
		}
		*p = b
	}
	return nil
}

// lockConfig is what every command that locks needs beyond the connection.
type lockConfig struct {
	holder string
	lease  time.Duration // 0: the SDK's default
}

// needBucket returns a usage error when no bucket is configured.
func (a *app) needBucket() error {
	if a.bucket == "" {
		return usagef("no bucket: set --bucket or %s", envBucket)
	}
	return nil
}

// client builds the lock client for bucket, with the options for lc and
// the global flags plus extra. It validates everything it can before making
// any request.
func (a *app) client(ctx context.Context, bucket string, lc lockConfig, extra ...s3lock.Option) (*s3lock.Client, error) {
	objects, err := a.objects.Options()
	if err != nil {
		// The error never contains the customer key.
		return nil, fmt.Errorf("--encrypt, --kms-key-id, --sse-customer-key, --acl: %w", err)
	}
	opts := append(a.lockOptions(lc), extra...)
	opts = append(opts, objects...)
	// Check the bucket and the lock options before the AWS configuration,
	// whose loading may read files.
	if err := s3lock.ValidateConfig(bucket, opts...); err != nil {
		return nil, err
	}
	api, err := a.s3API(ctx)
	if err != nil {
		return nil, err
	}
	return s3lock.New(api, bucket, opts...)
}

// lockOptions returns the s3lock options for lc and the global flags.
func (a *app) lockOptions(lc lockConfig) []s3lock.Option {
	var opts []s3lock.Option
	if lc.holder != "" {
		opts = append(opts, s3lock.WithHolder(lc.holder))
	}
	if lc.lease != 0 {
		opts = append(opts, s3lock.WithLeaseDuration(lc.lease))
	}
	if a.bucketOwner != "" {
		opts = append(opts, s3lock.WithExpectedBucketOwner(a.bucketOwner))
	}
	if a.debug {
		opts = append(opts, s3lock.WithLogger(slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	if a.stats != nil {
		opts = append(opts, s3lock.WithObserver(a.stats))
	}
	return opts
}

// s3API builds the S3 client from the connection flags and the standard
// AWS configuration. It makes no request.
func (a *app) s3API(ctx context.Context) (*s3.Client, error) {
	api, err := awsclient.New(ctx, a.awsOptions())
	if errors.Is(err, awsclient.ErrNoRegion) {
		return nil, usagef("no AWS region: set --region, %s or AWS_REGION", envRegionS3Lock)
	}
	return api, err
}

// durationFlag registers a duration flag that rejects negative values.
func durationFlag(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	fs.Var(&nonNegDuration{p: p}, name, usage)
	*p = def
	fs.Lookup(name).DefValue = def.String()
}

type nonNegDuration struct{ p *time.Duration }

func (d *nonNegDuration) String() string {
	if d.p == nil {
		return "0s"
	}
	return d.p.String()
}

func (d *nonNegDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (examples: 90s, 5m, 1h30m)")
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	*d.p = v
	return nil
}

func (d *nonNegDuration) Type() string { return "duration" }
