package provider

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// newTFLogger returns a slog.Logger that writes to Terraform's log through
// tflog, in the context of one provider operation: s3lock logs its
// acquisitions, waits, renewals and releases there (visible with TF_LOG).
func newTFLogger(ctx context.Context) *slog.Logger {
	return slog.New(&tflogHandler{ctx: ctx})
}

// tflogHandler is a slog.Handler over tflog.
type tflogHandler struct {
	ctx    context.Context
	attrs  []slog.Attr
	prefix string // group prefix for attribute keys
}

var _ slog.Handler = (*tflogHandler)(nil)

func (h *tflogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *tflogHandler) Handle(_ context.Context, r slog.Record) error {
	fields := make(map[string]any, len(h.attrs)+r.NumAttrs())
	for _, a := range h.attrs {
		addField(fields, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		addField(fields, h.prefix, a)
		return true
	})
	switch {
	case r.Level >= slog.LevelError:
		tflog.Error(h.ctx, r.Message, fields)
	case r.Level >= slog.LevelWarn:
		tflog.Warn(h.ctx, r.Message, fields)
	case r.Level >= slog.LevelInfo:
		tflog.Info(h.ctx, r.Message, fields)
	default:
		tflog.Debug(h.ctx, r.Message, fields)
	}
	return nil
}

func (h *tflogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = append(n.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	return &n
}

func (h *tflogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.prefix = h.prefix + name + "."
	return &n
}

// addField flattens an attribute into fields, turning values that do not
// encode well as JSON (errors, durations, times) into strings.
func addField(fields map[string]any, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	key := prefix + a.Key
	switch v.Kind() {
	case slog.KindGroup:
		for _, g := range v.Group() {
			addField(fields, key+".", g)
		}
	case slog.KindDuration:
		fields[key] = v.Duration().String()
	case slog.KindTime:
		fields[key] = v.Time().UTC().Format(time.RFC3339Nano)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			fields[key] = x.Error()
		case fmt.Stringer:
			fields[key] = x.String()
		default:
			fields[key] = x
		}
	default:
		fields[key] = v.Any()
	}
}
