package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// probeBucket is the bucket the probes use on a fresh store.
const probeBucket = "s3lock-compat"

// prober measures one store. Its client never retries, so that every
// answer counted is the store's own.
type prober struct {
	st     s3server.Store
	client *s3.Client
	bucket string
	cli    string // the s3lock binary
}

func newProber(ctx context.Context, st s3server.Store, cli string, writers int) (*prober, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 2 * writers
	client := s3server.NewClient(st, &http.Client{Transport: transport, Timeout: requestLimit})
	if err := s3test.EnsureBucket(ctx, client, probeBucket); err != nil {
		return nil, err
	}
	return &prober{st: st, client: client, bucket: probeBucket, cli: cli}, nil
}

// requestLimit bounds one probe request: a store that hangs is reported, not
// waited for.
const requestLimit = 30 * time.Second

// probe runs every probe: storecheck.Verify, `s3lock verify`, the quirks, the races and
// the latencies.
func (p *prober) probe(ctx context.Context, writers, rounds, samples int) (*Probe, error) {
	out := &Probe{Date: today(), Writers: writers, Rounds: rounds}
	out.Verify = p.verify(ctx)
	var err error
	if out.CLIVerify, err = runCLIVerify(ctx, p.cli, p.st, p.bucket, "compat/"); err != nil {
		return nil, err
	}
	if out.Quirks, err = p.quirks(ctx); err != nil {
		return nil, err
	}
	for _, race := range []struct {
		name string
		run  func(context.Context, int, int) (Race, error)
	}{
		{"create (If-None-Match: *)", p.createRace},
		{"compare-and-swap (If-Match)", p.casRace},
		{"DELETE (If-Match) vs PUT (If-Match)", p.deleteRace},
	} {
		start := time.Now()
		r, err := race.run(ctx, writers, rounds)
		if err != nil {
			return nil, fmt.Errorf("%s race: %w", race.name, err)
		}
		fmt.Printf("%s: %s race done in %s\n", p.st.Kind(), race.name, time.Since(start).Round(time.Second))
		r.Name = race.name
		out.Races = append(out.Races, r)
	}
	if out.Latency, err = p.latency(ctx, samples); err != nil {
		return nil, err
	}
	return out, nil
}

// verify runs the SDK's storecheck.Verify; "ok" or the error.
func (p *prober) verify(ctx context.Context) string {
	c, err := s3lock.New(p.client, p.bucket)
	if err != nil {
		return err.Error()
	}
	if err := storecheck.Verify(ctx, c, "compat/"); err != nil {
		return err.Error()
	}
	return "ok"
}

// key returns a fresh key for one probe.
func key(what string) string { return "compat/" + what + "-" + s3test.RandomHex(6) }

func (p *prober) put(ctx context.Context, key, body string, set func(*s3.PutObjectInput)) (string, error) {
	in := &s3.PutObjectInput{Bucket: &p.bucket, Key: &key, Body: strings.NewReader(body)}
	if set != nil {
		set(in)
	}
	out, err := p.client.PutObject(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

func unique(what string) string {
	return `{"probe":"` + what + `","nonce":"` + s3test.RandomHex(8) + `"}`
}

// conditionFailed reports whether err is the store refusing a request on
// its condition (412, or 409 ConditionalRequestConflict).
func conditionFailed(err error) bool {
	code := status(err)
	return code == http.StatusPreconditionFailed || code == http.StatusConflict
}

// status returns the HTTP status of a failed request; 0 if there was none.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// answer describes the outcome of a request: "200", "412 PreconditionFailed", ...
func answer(err error, ok int) string {
	if err == nil {
		return fmt.Sprint(ok)
	}
	code := status(err)
	var api smithy.APIError
	if errors.As(err, &api) && code != 0 {
		return fmt.Sprintf("%d %s", code, api.ErrorCode())
	}
	if code != 0 {
		return fmt.Sprint(code)
	}
	return "error: " + err.Error()
}

// race runs rounds of n concurrent requests that start together; req is
// request i of a round on its key, after setup prepared the key. It counts
// the rounds by how many requests succeeded.
func (p *prober) race(ctx context.Context, n, rounds int, setup func(context.Context, string) (string, error),
	req func(ctx context.Context, i int, key, etag string) error) (Race, error) {
	var r Race
	for round := range rounds {
		k := key(fmt.Sprintf("race-%d", round))
		etag, err := setup(ctx, k)
		if err != nil {
			return r, err
		}
		start := make(chan struct{})
		results := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				results[i] = req(ctx, i, k, etag)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range results {
			switch {
			case err == nil:
				won++
			case !conditionFailed(err) && status(err) != http.StatusNotFound:
				r.Errors++
			}
		}
		switch {
		case won > 1:
			r.Several++
		case won == 1:
			r.OneWinner++
		case won == 0:
			r.None++
		}
	}
	return r, nil
}

func (p *prober) createRace(ctx context.Context, n, rounds int) (Race, error) {
	return p.race(ctx, n, rounds, func(context.Context, string) (string, error) { return "", nil },
		func(ctx context.Context, i int, k, _ string) error {
			_, err := p.put(ctx, k, unique(fmt.Sprint("create-", i)), func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
			return err
		})
}

func (p *prober) casRace(ctx context.Context, n, rounds int) (Race, error) {
	return p.race(ctx, n, rounds, func(ctx context.Context, k string) (string, error) { return p.put(ctx, k, unique("base"), nil) },
		func(ctx context.Context, i int, k, etag string) error {
			_, err := p.put(ctx, k, unique(fmt.Sprint("cas-", i)), func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) })
			return err
		})
}

// deleteRace: request 0 deletes the key with If-Match on its ETag while the
// others replace it with If-Match on the same ETag.
func (p *prober) deleteRace(ctx context.Context, n, rounds int) (Race, error) {
	return p.race(ctx, n, rounds, func(ctx context.Context, k string) (string, error) { return p.put(ctx, k, unique("base"), nil) },
		func(ctx context.Context, i int, k, etag string) error {
			if i == 0 {
				_, err := p.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &p.bucket, Key: &k, IfMatch: aws.String(etag)})
				return err
			}
			_, err := p.put(ctx, k, unique(fmt.Sprint("put-", i)), func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) })
			return err
		})
}

// latency measures the median of samples sequential creates, CASes and GETs.
func (p *prober) latency(ctx context.Context, samples int) (Latency, error) {
	l := Latency{Samples: samples}
	timed := func(f func() error) (float64, error) {
		start := time.Now()
		err := f()
		return float64(time.Since(start).Microseconds()) / 1000, err
	}
	var creates, cases, gets []float64
	k := key("latency")
	etag, err := p.put(ctx, k, unique("latency"), nil)
	if err != nil {
		return l, err
	}
	for i := range samples {
		d, err := timed(func() error {
			_, err := p.put(ctx, key("create"), unique("create"), func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
			return err
		})
		if err != nil {
			return l, fmt.Errorf("create %d: %w", i, err)
		}
		creates = append(creates, d)
		d, err = timed(func() error {
			etag, err = p.put(ctx, k, unique("cas"), func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) })
			return err
		})
		if err != nil {
			return l, fmt.Errorf("CAS %d: %w", i, err)
		}
		cases = append(cases, d)
		d, err = timed(func() error {
			out, err := p.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &p.bucket, Key: &k})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			_, err = io.Copy(io.Discard, out.Body)
			return err
		})
		if err != nil {
			return l, fmt.Errorf("GET %d: %w", i, err)
		}
		gets = append(gets, d)
	}
	l.CreateMs, l.CASMs, l.GetMs = median(creates), median(cases), median(gets)
	return l, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// quirks checks, one request sequence each, the behaviours in which
// S3-compatible stores are known to differ from AWS S3.
func (p *prober) quirks(ctx context.Context) ([]Quirk, error) {
	var out []Quirk
	for _, q := range []struct {
		check string
		run   func(context.Context) (answer string, asAWS bool, err error)
	}{
		{"PUT with If-Match on a missing key", p.quirkIfMatchMissing},
		{"PUT with If-None-Match: <the current ETag>", p.quirkIfNoneMatchETag},
		{"DELETE with If-Match on a stale ETag", p.quirkStaleDelete},
		{"two PUTs of the same body", p.quirkSameBody},
		{"keys a/b and a/b/c side by side", p.quirkNested},
		{"a LIST of the prefix a/b/ while an object a/b exists", p.quirkListUnderObject},
		{"a delimited LIST after the only key under a prefix was deleted", p.quirkDeletedPrefix},
		{"a request signed with a wrong secret key", p.quirkWrongSecret},
	} {
		ans, asAWS, err := q.run(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.check, err)
		}
		out = append(out, Quirk{Check: q.check, Answer: ans, AsAWS: asAWS})
	}
	return out, nil
}

// AWS answers 404 NoSuchKey.
func (p *prober) quirkIfMatchMissing(ctx context.Context) (string, bool, error) {
	_, err := p.put(ctx, key("missing"), unique("if-match-missing"), func(in *s3.PutObjectInput) {
		in.IfMatch = aws.String(`"00000000000000000000000000000000"`)
	})
	return answer(err, 200), status(err) == http.StatusNotFound, nil
}

// AWS accepts only "*" in If-None-Match on PUT: 501 NotImplemented.
func (p *prober) quirkIfNoneMatchETag(ctx context.Context) (string, bool, error) {
	k := key("inm-etag")
	etag, err := p.put(ctx, k, unique("inm-etag"), nil)
	if err != nil {
		return "", false, err
	}
	_, err = p.put(ctx, k, unique("inm-etag-2"), func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String(etag) })
	ans := answer(err, 200)
	if err == nil {
		ans += " (the header was ignored: the object was replaced)"
	}
	return ans, status(err) == http.StatusNotImplemented, nil
}

// AWS answers 412 and keeps the object.
func (p *prober) quirkStaleDelete(ctx context.Context) (string, bool, error) {
	k := key("stale-delete")
	if _, err := p.put(ctx, k, unique("stale-delete"), nil); err != nil {
		return "", false, err
	}
	_, err := p.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &p.bucket, Key: &k, IfMatch: aws.String(`"00000000000000000000000000000000"`)})
	ans := answer(err, 204)
	_, herr := p.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &p.bucket, Key: &k})
	switch {
	case herr == nil:
		ans += ", object kept"
	case status(herr) == http.StatusNotFound:
		ans += ", object deleted (If-Match ignored)"
	default:
		return "", false, herr
	}
	return ans, status(err) == http.StatusPreconditionFailed && herr == nil, nil
}

// AWS's ETag of a single-part PUT is the body's MD5: the same body, the same
// ETag (why s3lock makes every body unique).
func (p *prober) quirkSameBody(ctx context.Context) (string, bool, error) {
	k := key("same-body")
	a, err := p.put(ctx, k, "same", nil)
	if err != nil {
		return "", false, err
	}
	b, err := p.put(ctx, k, "same", nil)
	if err != nil {
		return "", false, err
	}
	if a == b {
		return "same ETag", true, nil
	}
	return "different ETags", false, nil
}

// AWS keeps both keys.
func (p *prober) quirkNested(ctx context.Context) (string, bool, error) {
	k := key("nested")
	if _, err := p.put(ctx, k+"/b", unique("b"), nil); err != nil {
		return "", false, err
	}
	_, err := p.put(ctx, k+"/b/c", unique("c"), nil)
	if err != nil {
		return "second PUT: " + answer(err, 200), false, nil
	}
	return "both kept", true, nil
}

// AWS lists a/b/c under the prefix a/b/ whether or not an object a/b
// exists. A store that hides it would show a lock named after an object as
// free (s3lock refuses such a name at its first acquisition).
func (p *prober) quirkListUnderObject(ctx context.Context) (string, bool, error) {
	k := key("shadowed")
	if _, err := p.put(ctx, k+"/b", unique("b"), nil); err != nil {
		return "", false, err
	}
	if _, err := p.put(ctx, k+"/b/c", unique("c"), nil); err != nil {
		return "a/b/c cannot be written: " + answer(err, 200), false, nil
	}
	out, err := p.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &p.bucket, Prefix: aws.String(k + "/b/")})
	if err != nil {
		return "", false, err
	}
	for _, o := range out.Contents {
		if aws.ToString(o.Key) == k+"/b/c" {
			return "lists a/b/c", true, nil
		}
	}
	return "hides a/b/c", false, nil
}

// AWS lists no common prefix once no key is under it (a store that keeps
// directories may still list an emptied one).
func (p *prober) quirkDeletedPrefix(ctx context.Context) (string, bool, error) {
	k := key("emptied")
	if _, err := p.put(ctx, k+"/sub/x", unique("x"), nil); err != nil {
		return "", false, err
	}
	if _, err := p.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &p.bucket, Key: aws.String(k + "/sub/x")}); err != nil {
		return "", false, err
	}
	out, err := p.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &p.bucket, Prefix: aws.String(k + "/"), Delimiter: aws.String("/")})
	if err != nil {
		return "", false, err
	}
	if n := len(out.CommonPrefixes) + len(out.Contents); n > 0 {
		return fmt.Sprintf("still lists the emptied prefix (%d entries)", n), false, nil
	}
	return "lists nothing", true, nil
}

// AWS answers 403 SignatureDoesNotMatch.
func (p *prober) quirkWrongSecret(ctx context.Context) (string, bool, error) {
	creds := p.st.Credentials()
	wrong := s3.New(s3.Options{
		Region: s3server.Region, BaseEndpoint: aws.String(p.st.URL()), UsePathStyle: true, Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, "wrong-"+creds.SecretAccessKey, ""),
	})
	_, err := wrong.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &p.bucket, MaxKeys: aws.Int32(1)})
	if err == nil {
		return "accepted", false, nil
	}
	return "rejected: " + answer(err, 200), status(err) == http.StatusForbidden, nil
}

func today() string { return time.Now().UTC().Format(time.DateOnly) }
