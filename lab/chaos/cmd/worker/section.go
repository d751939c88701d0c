package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
)

const (
	// registerTimeout bounds a read of the register, and a write by a
	// worker that cannot see its lease's deadline (the command of an
	// `s3lock run`, the broken worker).
	registerTimeout = 5 * time.Second
	// brokenOverstay is how much longer than its lease the broken worker's
	// critical section lasts: the lease lapses (lease + 2 s of the store's
	// slack) and someone else takes over before the broken worker writes.
	brokenOverstay = 6 * time.Second
)

// registerBody is the register's content. Every write has a body of its own
// (the epoch, the writer and its critical section), so no state recurs and
// fence.Put's If-Match can never match a state an older writer read (see
// the SDK's fence.Put on identical rewrites).
type registerBody struct {
	Value  int64  `json:"value"`
	Epoch  uint64 `json:"epoch"`
	Writer string `json:"writer"`
	CS     int    `json:"cs"`
}

// section is one critical section under epoch: read the register, work,
// write value+1. trust says until when the lease is trusted; the worker
// checks it before it starts and before it writes. It returns false if the
// section stopped early (the lease is no longer trusted, the read failed, or
// ctx ended); its error is only a failure to write the history.
func (w *worker) section(ctx context.Context, epoch uint64, shared bool, trust func() (int64, bool)) (bool, error) {
	w.cs++
	r := record.Record{CS: w.cs, Epoch: epoch, Shared: shared}
	// The section begins once its trust check passed: a claim (the
	// deadline, and when the worker knew it) that the store's record can
	// judge (internal/witness).
	until, ok := trust()
	at := record.Now()
	if !ok || stopping(ctx) {
		return false, nil
	}
	if err := w.note(r, record.Begin, at, func(r *record.Record) { r.Until = until }); err != nil {
		return false, err
	}
	if err := w.note(r, record.ReadCall, 0, func(*record.Record) {}); err != nil {
		return false, err
	}
	value, etag, readErr := w.read(ctx)
	if err := w.note(r, record.ReadReturn, 0, func(r *record.Record) { r.Value, r.Err = value, errText(readErr) }); err != nil {
		return false, err
	}
	if readErr != nil {
		return false, w.note(r, record.End, 0, func(r *record.Record) { r.Until, r.Detail = until, "read failed" })
	}
	work := w.random(w.cfg.work)
	if w.cfg.broken {
		work = w.cfg.lease + brokenOverstay
	}
	slept := sleep(ctx, work)
	if u, ok := trust(); !ok || !slept {
		return false, w.note(r, record.End, 0, func(r *record.Record) {
			r.Until, r.Detail = until, "lease no longer trusted, or stopping: write skipped"
		})
	} else {
		until = u
	}
	if shared { // a shared holder never writes what the lock guards
		return true, w.note(r, record.End, 0, func(r *record.Record) { r.Until = until })
	}
	if err := w.note(r, record.WriteCall, 0, func(r *record.Record) { r.From, r.To, r.Until = value, value+1, until }); err != nil {
		return false, err
	}
	outcome, writeErr := w.write(ctx, epoch, value, etag, until)
	if err := w.note(r, record.WriteReturn, 0, func(r *record.Record) { r.Outcome, r.Err = outcome, errText(writeErr) }); err != nil {
		return false, err
	}
	if u, ok := trust(); ok {
		until = u
	}
	return outcome == record.OK, w.note(r, record.End, 0, func(r *record.Record) { r.Until = until })
}

// note writes r as kind at mono (now if 0), after set fills it in.
func (w *worker) note(r record.Record, kind record.Kind, mono int64, set func(*record.Record)) error {
	r.Kind, r.Mono = kind, mono
	set(&r)
	return w.rec.Write(r)
}

// read returns the register's value and ETag ("" if it does not exist yet).
func (w *worker) read(ctx context.Context) (int64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	out, err := w.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(w.cfg.bucket), Key: aws.String(w.cfg.register)})
	if notFound(err) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	defer out.Body.Close()
	var b registerBody
	if err := json.NewDecoder(io.LimitReader(out.Body, 1<<16)).Decode(&b); err != nil {
		return 0, "", fmt.Errorf("decoding the register: %w", err)
	}
	return b.Value, aws.ToString(out.ETag), nil
}

// write stores value+1 under epoch, as a compare-and-swap on the state the
// read saw (etag), and says how it ended. A correct worker writes with
// the SDK's fence.Put, by its lease's trust deadline (until); the
// broken one with a plain PutObject.
func (w *worker) write(ctx context.Context, epoch uint64, value int64, etag string, until int64) (record.Outcome, error) {
	body, err := json.Marshal(registerBody{Value: value + 1, Epoch: epoch, Writer: w.cfg.name, CS: w.cs})
	if err != nil {
		return record.Failed, err
	}
	in := &s3.PutObjectInput{Bucket: aws.String(w.cfg.bucket), Key: aws.String(w.cfg.register),
		Body: bytes.NewReader(body), ContentType: aws.String("application/json")}
	deadline := time.Now().Add(registerTimeout)
	if until != 0 && until != record.Forever {
		deadline = time.Now().Add(time.Duration(until - record.Now()))
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if w.cfg.broken {
		if _, err := w.api.PutObject(ctx, in); err != nil {
			return record.Unknown, err
		}
		return record.OK, nil
	}
	// A compare-and-swap on the state the read saw: fence.Put alone
	// conditions on its own HEAD, which would let value+1 overwrite a write
	// that landed between the read and that HEAD.
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	// A client of its own over api, so that api sees this write's requests
	// only; each request gives up after the SDK's default request timeout.
	api := &sentAPI{S3API: w.api}
	c, err := s3lock.New(api, w.cfg.bucket, s3lock.WithHolder(w.cfg.name))
	if err != nil {
		return record.Failed, err
	}
	_, err = fence.Put(ctx, c, epoch, in)
	switch {
	case err == nil:
		return record.OK, nil
	case !api.sent.Load():
		return record.Failed, err
	}
	return record.Unknown, err
}

// sentAPI notes whether fence.Put sent a PutObject: until it has, a failed
// write certainly did not happen.
type sentAPI struct {
	s3lock.S3API
	sent atomic.Bool
}

// PutObject notes that the write may have happened from here on.
func (c *sentAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.sent.Store(true)
	return c.S3API.PutObject(ctx, in, opts...)
}

// stopping reports whether ctx has ended (the worker got SIGTERM).
func stopping(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func notFound(err error) bool {
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
