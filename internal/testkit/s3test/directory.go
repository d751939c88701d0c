package s3test

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// DirectoryBuckets is an HTTP server in front of an S3-compatible store
// (versitygw) that answers as AWS documents S3 directory buckets (S3 Express
// One Zone) to answer, so that clients can be tested "as on a directory
// bucket" without AWS:
//
//   - ListObjectsV2 lists in no key order: the whole listing, ordered by an
//     unseeded hash of each key (the same in every run), cut into pages of MaxKeys with
//     continuation tokens of its own; a prefix that does not end in "/", a
//     delimiter other than "/" and StartAfter are refused with 400
//     InvalidArgument, as the API reference says they are not supported
//     (whether AWS refuses or ignores them is not documented: refusing
//     makes a client that depends on them fail here; SetLeniency makes
//     the emulation ignore or follow them instead);
//   - CreateSession (GET /BUCKET?session) hands out session credentials,
//     as the AWS SDKs ask for before they sign a directory bucket's
//     requests with the "s3express" service name; the server re-signs
//     every request for the store behind it;
//   - deleting an object deletes the empty directories above it: versitygw's
//     posix backend does so itself (TestDirectoryBuckets_DeletesEmptyDirectories).
//
// Not emulated: ETags that are not MD5s, zonal endpoints and
// virtual-hosted-style addressing (clients reach it path-style on loopback).
// docs/compatibility.md says which of s3lock's tests ran only here.
type DirectoryBuckets struct {
	// URL is the endpoint to give clients (http://127.0.0.1:PORT).
	URL string

	upstream *url.URL
	store    *s3.Client
	creds    aws.Credentials
	region   string
	srv      *http.Server
	leniency atomic.Int32 // a Leniency
}

// Leniency is what the emulation makes of the listing parameters AWS
// documents directory buckets not to support (a prefix that does not end
// in "/", another delimiter, StartAfter). AWS does not document whether a
// directory bucket refuses or ignores them; the lenient modes show what a
// client that relies on them would do on a store that does not refuse
// them.
type Leniency int32

const (
	// Strict refuses them with 400 InvalidArgument (the default).
	Strict Leniency = iota
	// IgnoringStartAfter accepts any prefix and delimiter and ignores
	// StartAfter: every listing starts at the beginning.
	IgnoringStartAfter
	// StartAfterInListingOrder accepts any prefix and delimiter and takes
	// StartAfter as a position in the listing's own (hash) order, as a
	// continuation token is: the page holds the keys that follow that key
	// in the store's order, not the keys greater than it.
	StartAfterInListingOrder
)

// SetLeniency sets what the emulation makes of the listing parameters
// directory buckets do not support.
func (d *DirectoryBuckets) SetLeniency(l Leniency) { d.leniency.Store(int32(l)) }

// StartDirectoryBuckets starts the emulation in front of the store at
// endpoint, whose credentials it signs with.
func StartDirectoryBuckets(endpoint, region, accessKey, secretKey string) (*DirectoryBuckets, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the directory bucket emulation: %w", err)
	}
	d := &DirectoryBuckets{
		URL:      "http://" + ln.Addr().String(),
		upstream: u,
		creds:    aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey},
		region:   region,
	}
	// The store's own client signs as for a directory bucket too (the
	// bucket's name says so); it is re-signed on the way, as a client's is.
	d.store = s3.New(s3.Options{Region: region, UsePathStyle: true, BaseEndpoint: aws.String(endpoint),
		Credentials:                 credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		DisableS3ExpressSessionAuth: aws.Bool(true),
		HTTPClient:                  &http.Client{Transport: resigning{d}}})
	proxy := &httputil.ReverseProxy{
		Rewrite:  func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = u.Host; d.resign(pr.Out) },
		ErrorLog: log.New(io.Discard, "", 0),
	}
	d.srv = &http.Server{Handler: d.route(proxy), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// NewDirectoryBucket starts the emulation in front of the default local
// store for the rest of the test and creates a bucket on it named as a
// directory bucket. It returns the emulation, the target that reaches it
// and the bucket. It skips the test on any other store, and under
// EnvDirectoryBuckets (whose own emulation the test already runs on).
func NewDirectoryBucket(tb testing.TB) (*DirectoryBuckets, Target, string) {
	tb.Helper()
	tg := TargetFor(tb)
	if !tg.Local || tg.Directory || tg.Bucket != "" {
		tb.Skip("starts its own directory bucket emulation in front of the default local store")
	}
	d, err := StartDirectoryBuckets(tg.Endpoint, tg.Region, tg.AccessKey, tg.SecretKey)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Close)
	bucket := "s3lock-" + RandomHex(6) + DirectoryBucketSuffix
	if err := d.CreateBucket(tb.Context(), bucket); err != nil {
		tb.Fatal(err)
	}
	tg.Endpoint, tg.Directory = d.URL, true
	return d, tg, bucket
}

// CreateBucket creates a bucket on the store behind, as the directory
// bucket's owner does on AWS's regional endpoint, outside the emulation.
func (d *DirectoryBuckets) CreateBucket(ctx context.Context, bucket string) error {
	_, err := d.store.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	return err
}

// Close stops the server.
func (d *DirectoryBuckets) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
}

func (d *DirectoryBuckets) route(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodGet && q.Has("session"):
			d.createSession(w, r)
		case r.Method == http.MethodGet && q.Get("list-type") == "2":
			d.list(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// resign replaces the client's signature (service "s3express", with a
// session token) with one the store behind accepts.
func (d *DirectoryBuckets) resign(r *http.Request) {
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-S3session-Token"} {
		r.Header.Del(h)
	}
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if hash == "" {
		hash = "UNSIGNED-PAYLOAD"
		r.Header.Set("X-Amz-Content-Sha256", hash)
	}
	_ = v4.NewSigner().SignHTTP(r.Context(), d.creds, r, hash, "s3", d.region, time.Now())
}

// resigning is a transport that re-signs each request for the store.
type resigning struct{ d *DirectoryBuckets }

func (t resigning) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	t.d.resign(r)
	return http.DefaultTransport.RoundTrip(r)
}

// createSession answers CreateSession with the store's own credentials as
// the session's (the server re-signs every request anyway), once it has
// checked the request's signature and that the bucket exists: a client with
// a wrong secret or an unknown access key, or a missing bucket, fails here
// as on AWS.
func (d *DirectoryBuckets) createSession(w http.ResponseWriter, r *http.Request) {
	if code, msg := d.checkSignature(r); code != "" {
		writeErrorStatus(w, http.StatusForbidden, code, msg)
		return
	}
	bucket := strings.Trim(r.URL.Path, "/")
	if _, err := d.store.HeadBucket(r.Context(), &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		var notFound *types.NotFound
		if errors.As(err, &notFound) {
			writeErrorStatus(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		} else {
			writeErrorStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
		}
		return
	}
	type creds struct {
		SessionToken    string `xml:"SessionToken"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		AccessKeyID     string `xml:"AccessKeyId"`
		Expiration      string `xml:"Expiration"`
	}
	type result struct {
		XMLName     xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CreateSessionResult"`
		Credentials creds    `xml:"Credentials"`
	}
	writeXML(w, http.StatusOK, result{Credentials: creds{SessionToken: "s3test-directory-session",
		SecretAccessKey: d.creds.SecretAccessKey, AccessKeyID: d.creds.AccessKeyID,
		Expiration: time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)}})
}

// checkSignature checks a request's SigV4 signature against the store's
// credentials: it signs the request's signed headers again, at the request's
// own time, and compares. It returns an S3 error code and message if they
// differ.
func (d *DirectoryBuckets) checkSignature(r *http.Request) (code, msg string) {
	auth := r.Header.Get("Authorization")
	m := authorization.FindStringSubmatch(auth)
	if m == nil {
		return "AccessDenied", "the request is not signed with AWS4-HMAC-SHA256"
	}
	keyID, service, signed, signature := m[1], m[2], strings.Split(m[3], ";"), m[4]
	if keyID != d.creds.AccessKeyID {
		return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "AccessDenied", "the request has no valid X-Amz-Date"
	}
	again, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return "AccessDenied", err.Error()
	}
	for _, h := range signed {
		if h != "host" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	_ = v4.NewSigner().SignHTTP(r.Context(), d.creds, again, r.Header.Get("X-Amz-Content-Sha256"), service, d.region, at)
	if n := authorization.FindStringSubmatch(again.Header.Get("Authorization")); n == nil || n[4] != signature {
		return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."
	}
	return "", ""
}

// authorization parses a SigV4 Authorization header: access key id,
// service, signed headers, signature.
var authorization = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$`)

// entry is one line of a listing: an object, or a common prefix.
type entry struct {
	Key          string `xml:"Key,omitempty"`
	LastModified string `xml:"LastModified,omitempty"`
	ETag         string `xml:"ETag,omitempty"`
	Size         *int64 `xml:"Size,omitempty"`
	StorageClass string `xml:"StorageClass,omitempty"`
	prefix       string
	order        uint64
}

type commonPrefix struct {
	Prefix string `xml:"Prefix"`
}

type listResult struct {
	XMLName               xml.Name       `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	Delimiter             string         `xml:"Delimiter,omitempty"`
	MaxKeys               int            `xml:"MaxKeys"`
	KeyCount              int            `xml:"KeyCount"`
	IsTruncated           bool           `xml:"IsTruncated"`
	EncodingType          string         `xml:"EncodingType,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	Contents              []entry        `xml:"Contents"`
	CommonPrefixes        []commonPrefix `xml:"CommonPrefixes"`
}

// list answers ListObjectsV2 as a directory bucket does (see DirectoryBuckets).
func (d *DirectoryBuckets) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bucket := strings.Trim(r.URL.Path, "/")
	prefix, delimiter := q.Get("prefix"), q.Get("delimiter")
	lenient := Leniency(d.leniency.Load())
	switch {
	case lenient != Strict:
	case prefix != "" && !strings.HasSuffix(prefix, "/"):
		refuse(w, "directory buckets: only prefixes that end in a delimiter (/) are supported, not "+strconv.Quote(prefix))
		return
	case delimiter != "" && delimiter != "/":
		refuse(w, "directory buckets: only / can be specified as the delimiter, not "+strconv.Quote(delimiter))
		return
	case q.Has("start-after"):
		refuse(w, "directory buckets: StartAfter is not supported")
		return
	}
	all, err := d.listAll(r.Context(), bucket, prefix, delimiter)
	if err != nil {
		// The store behind did not answer (restarted, say): an outage.
		writeErrorStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", err.Error())
		return
	}
	size := 1000
	if n, err := strconv.Atoi(q.Get("max-keys")); err == nil && n >= 0 && n < size {
		size = n
	}
	start := 0
	if tok := q.Get("continuation-token"); tok != "" {
		after, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			refuse(w, "the continuation token is not one of this store's")
			return
		}
		start = following(all, string(after))
	} else if after := q.Get("start-after"); after != "" && lenient == StartAfterInListingOrder {
		start = following(all, after)
	}
	end := min(start+size, len(all))
	res := listResult{Name: bucket, Prefix: prefix, Delimiter: delimiter, MaxKeys: size, KeyCount: end - start,
		IsTruncated: end < len(all), ContinuationToken: q.Get("continuation-token")}
	if res.IsTruncated {
		res.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(all[end-1].name()))
	}
	escape := func(s string) string { return s }
	if q.Get("encoding-type") == "url" {
		res.EncodingType = "url"
		escape = func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/") }
		res.Prefix = escape(res.Prefix)
	}
	for _, e := range all[start:end] {
		if e.prefix != "" {
			res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{Prefix: escape(e.prefix)})
			continue
		}
		e.Key = escape(e.Key)
		res.Contents = append(res.Contents, e)
	}
	writeXML(w, http.StatusOK, res)
}

// listAll lists every key and common prefix under prefix from the store,
// in the emulation's order.
func (d *DirectoryBuckets) listAll(ctx context.Context, bucket, prefix, delimiter string) ([]entry, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	if delimiter != "" {
		in.Delimiter = aws.String(delimiter)
	}
	var all []entry
	for p := s3.NewListObjectsV2Paginator(d.store, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range out.Contents {
			all = append(all, entry{Key: aws.ToString(o.Key), ETag: aws.ToString(o.ETag), Size: o.Size,
				LastModified: aws.ToTime(o.LastModified).UTC().Format("2006-01-02T15:04:05.000Z"), StorageClass: "EXPRESS_ONEZONE"})
		}
		for _, cp := range out.CommonPrefixes {
			all = append(all, entry{prefix: aws.ToString(cp.Prefix)})
		}
	}
	for i := range all {
		all[i].order = hashOrder(all[i].name())
	}
	slices.SortFunc(all, compareEntries)
	return all, nil
}

// following returns the index in all (in the emulation's order) of the
// first entry that follows key, whether key is listed or not.
func following(all []entry, key string) int {
	last := entry{Key: key, order: hashOrder(key)}
	i, _ := slices.BinarySearchFunc(all, last, compareEntries)
	if i < len(all) && all[i].name() == key {
		i++
	}
	return i
}

func (e entry) name() string {
	if e.prefix != "" {
		return e.prefix
	}
	return e.Key
}

// hashOrder places a key in the emulation's listing order: no relation to
// the key order, but the same for every page of a listing, so continuation
// tokens show each key once.
func hashOrder(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()
}

func compareEntries(a, b entry) int {
	if a.order != b.order {
		if a.order < b.order {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name(), b.name())
}

// refuse answers 400 InvalidArgument, as S3 answers a request it does not
// support.
func refuse(w http.ResponseWriter, msg string) {
	writeErrorStatus(w, http.StatusBadRequest, "InvalidArgument", msg)
}

func writeErrorStatus(w http.ResponseWriter, status int, code, msg string) {
	type s3Error struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
		Message string   `xml:"Message"`
	}
	writeXML(w, status, s3Error{Code: code, Message: msg})
}

func writeXML(w http.ResponseWriter, status int, v any) {
	body, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
