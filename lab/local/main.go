// Command local is what `make local` runs: an S3-compatible store on this
// machine to try s3lock by hand. It starts the pinned versitygw on loopback
// in the foreground, creates a bucket, and prints the export lines that point
// the CLI, the Go SDK and the Terraform provider at it. Ctrl-C stops it.
//
// The buckets live in -dir (by default .local/s3 in the checkout, which git
// ignores) and stay there between runs: remove the directory to start
// afresh. The credentials are fixed ones that only this loopback store
// accepts (those of internal/testkit/s3server).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

const (
	// defaultPort is versitygw's own default, and the port of the CLI's
	// --endpoint example.
	defaultPort   = 7070
	defaultBucket = "s3lock-local"
	// signalGrace is how long, once versitygw has exited, to wait for the
	// signal that may have stopped it: a terminal's Ctrl-C reaches every
	// process of the foreground group, versitygw too, and that is a stop
	// asked for, not a crash.
	signalGrace = time.Second
)

// settings are the command's flags.
type settings struct {
	port   int
	dir    string
	bucket string
}

func main() {
	var s settings
	flag.IntVar(&s.port, "port", defaultPort, "loopback port of the S3 endpoint")
	flag.StringVar(&s.dir, "dir", "", "directory of the buckets, kept between runs (default .local/s3 in the checkout)")
	flag.StringVar(&s.bucket, "bucket", defaultBucket, "bucket to create (if it does not exist yet)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, s); err != nil {
		fmt.Fprintln(os.Stderr, "make local:", err)
		os.Exit(1)
	}
}

// run starts the store, creates the bucket, prints the exports to out and
// serves until ctx ends (a signal) or versitygw exits on its own (an error).
func run(ctx context.Context, out io.Writer, s settings) error {
	if s.dir == "" {
		root, err := tfharness.RepoRoot()
		if err != nil {
			return err
		}
		s.dir = filepath.Join(root, ".local", "s3")
	}
	if s.port < 1 || s.port > 65535 {
		return fmt.Errorf("port %d is not a TCP port: choose one from 1 to 65535, e.g. make local PORT=%d", s.port, defaultPort)
	}
	if err := s3lock.ValidateConfig(s.bucket); err != nil {
		return fmt.Errorf("bucket %q: %w", s.bucket, err)
	}
	if err := portFree(s.port); err != nil {
		return err
	}
	fmt.Fprintln(out, "starting versitygw (the first run on a machine builds it, about two minutes) ...")
	srv, err := s3server.Start(ctx, s3server.Options{Dir: s.dir, Port: s.port})
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := ensureBucket(ctx, srv.Endpoint, s.bucket); err != nil {
		return err
	}
	printExports(out, srv.Endpoint, srv.Dir, s.bucket)
	select {
	case <-ctx.Done():
	case <-srv.Exited():
		select {
		case <-ctx.Done():
		case <-time.After(signalGrace):
			return fmt.Errorf("versitygw exited on its own:\n%s", srv.Logs())
		}
	}
	srv.Stop()
	fmt.Fprintf(out, "\nstopped; the buckets stay in %s\n", srv.Dir)
	return nil
}

// portFree fails, naming the way out, when something listens on port
// already (another make local?): versitygw would fail to bind, and the
// readiness check could meet the other server instead.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is taken (another make local?); choose another: make local PORT=%d", port, port+1)
	}
	return l.Close()
}

// ensureBucket creates bucket unless it exists from an earlier run.
func ensureBucket(ctx context.Context, endpoint, bucket string) error {
	api := s3.New(s3.Options{
		Region: s3server.Region, BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3server.AccessKeyID, s3server.SecretAccessKey, ""),
	})
	return s3test.EnsureBucket(ctx, api, bucket)
}

// printExports tells the user how to reach the store: the variables the
// CLI, the AWS SDK (and so s3lock's) and the provider read, then one line
// per face.
func printExports(out io.Writer, endpoint, dir, bucket string) {
	fmt.Fprintf(out, `
versitygw serves S3 at %[1]s, bucket %[2]s. Its data is in %[3]s
and stays there between runs (remove it to start afresh). Ctrl-C stops it.
The credentials below are fixed ones that only this loopback store accepts.

Paste these into another shell:

export AWS_ENDPOINT_URL_S3=%[1]s  # the CLI, the AWS SDK and the provider read it
export S3LOCK_USE_PATH_STYLE=true
export S3LOCK_BUCKET=%[2]s
export AWS_ACCESS_KEY_ID=%[4]s
export AWS_SECRET_ACCESS_KEY=%[5]s
export AWS_REGION=%[6]s
unset AWS_PROFILE AWS_SESSION_TOKEN

CLI (make build):   bin/s3lock verify && bin/s3lock run try/me -- sleep 10
Go SDK:             cfg, err := config.LoadDefaultConfig(ctx)
                    api := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
                    locks, err := s3lock.New(api, %[2]q)
Terraform/OpenTofu: provider "s3lock" {
                      use_path_style              = true
                      skip_credentials_validation = true # the store has no STS
                    }
                    with bucket = %[2]q in the leases (README: the provider's filesystem mirror)
`, endpoint, bucket, dir, s3server.AccessKeyID, s3server.SecretAccessKey, s3server.Region)
}
