package main

import (
	"context"
	"fmt"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
)

// profileResult is what the run measured under one latency profile.
type profileResult struct {
	profile *latency.Profile
	reps    int       // runs per hold time of release
	release []handoff // s3lock and terraform, every hold time and rep
	crash   []handoff
	renewal counts    // requests of one s3lock renewal
	series  []handoff // s3lock's many short handoffs (series.go)
	slots   slotsResult
	times   *opTimes // every answered request at the profile's taps
}

// measureProfiles runs the handoff, takeover and slot measurements under
// every profile asked for, and the scale measurements once, on loopback.
func (l *lab) measureProfiles(ctx context.Context, res *results) error {
	for _, p := range l.cfg.profiles {
		pr := &profileResult{profile: p, reps: l.cfg.profileReps, times: &opTimes{}}
		if p.Delayless() {
			pr.reps = l.cfg.reps
		}
		pl := l.under(p, pr.times)
		for _, step := range []func(context.Context, *profileResult) error{
			pl.measureTerraform, pl.measureS3lockHandoffs, pl.measureSeries, pl.measureSlots,
		} {
			if err := step(ctx, pr); err != nil {
				return fmt.Errorf("latency profile %s: %w", p.Name, err)
			}
		}
		res.profiles = append(res.profiles, pr)
		if p.Delayless() {
			res.release, res.crash, res.renewal = pr.release, pr.crash, pr.renewal
			if err := pl.measureScale(ctx, res); err != nil {
				return err
			}
		}
	}
	return nil
}

// loopbackResult returns the measurements of the delayless profile, nil
// when it was not run.
func (res *results) loopbackResult() *profileResult {
	for _, pr := range res.profiles {
		if pr.profile.Delayless() {
			return pr
		}
	}
	return nil
}
