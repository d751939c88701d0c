package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/s3lock/terraform-provider-s3lock/internal/buildinfo"
)

const rootLong = `s3lock holds locks in an S3 bucket (or any S3-compatible store that enforces
conditional writes). A lock is a name; each time it is acquired it gets a new
epoch, a number that only grows: pass it to what the lock protects as a
fencing token. A lease lasts --lease unless renewed; a holder that crashes
blocks others only until its lease lapses.

  export S3LOCK_BUCKET=my-locks   # plus the usual AWS credentials
  s3lock verify                   # once: may this store and these credentials lock?
  s3lock run migrations --wait 15m -- ./migrate.sh up
  s3lock status migrations

Settings come from flags, else from the environment; credentials from the
standard AWS chain. To try it on this machine: make local, in a checkout.`

// rootFlags are the flags the top-level help lists; every command takes
// them and the other connection flags, which its own --help lists.
var rootFlags = []string{"bucket", "endpoint", "use-path-style", "region", "profile", "debug", "stats", "help", "version"}

// environmentHelp is the help topic 's3lock help environment'.
const environmentHelp = `Configuration comes from flags, else from the environment:
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
renewals, how the lease ended, and its S3 requests by operation and outcome.`

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "s3lock",
		Short:         "Locks held in an S3 bucket, for shell steps and pipelines",
		Long:          rootLong,
		Version:       buildinfo.Version(version),
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
	a.globalFlags(root.PersistentFlags())
	root.AddCommand(
		a.runCommand(),
		a.acquireCommand(),
		a.renewCommand(),
		a.releaseCommand(),
		a.statusCommand(),
		a.watchCommand(),
		a.forceReleaseCommand(),
		a.verifyCommand(),
		a.backendCommand(),
		helpTopic("environment", "Every setting's flag and environment variable: credentials, roles, proxies, TLS", environmentHelp),
		helpTopic("exit-codes", "Exit codes: what each one means (every command's --help lists them too)", exitCodesHelp),
	)
	setRootHelp(root)
	return root
}

// globalFlags registers the flags every command takes: the bucket, the
// store, the objects s3lock writes, the connection, --debug and --stats.
func (a *app) globalFlags(pf *pflag.FlagSet) {
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
}
