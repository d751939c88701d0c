package latency

import (
	"slices"
	"testing"
	"time"
)

// draws is how many delays each sampling test draws per class: enough that
// the empirical median and p99 of a log-normal land within a few percent of
// the stated ones for any seed.
const draws = 50_000

func TestSampler_DrawsWithinTheProfile(t *testing.T) {
	for _, p := range Profiles {
		for c := range NumClasses {
			t.Run(p.Name+"/"+c.String(), func(t *testing.T) {
				s := NewSampler(p, 1, uint64(c))
				op := map[Class]string{Read: "GetObject", Write: "PutObject", List: "ListObjectsV2"}[c]
				ds := make([]time.Duration, draws)
				for i := range ds {
					ds[i] = s.Draw(op)
				}
				slices.Sort(ds)
				want := p.Classes[c]
				if want.Median == 0 {
					if ds[len(ds)-1] != 0 {
						t.Fatalf("a profile without delay for %s drew %s", c, ds[len(ds)-1])
					}
					return
				}
				if lo, hi := ds[0], ds[len(ds)-1]; lo <= 0 || hi > p.Ceiling {
					t.Errorf("draws span [%s, %s], outside (0, %s]", lo, hi, p.Ceiling)
				}
				within(t, "median", ds[len(ds)/2], want.Median, 0.05)
				within(t, "p99", ds[len(ds)*99/100], want.P99, 0.10)
			})
		}
	}
}

// within fails t unless got is within tolerance (a fraction) of want.
func within(t *testing.T, what string, got, want time.Duration, tolerance float64) {
	t.Helper()
	if diff := float64(got-want) / float64(want); diff < -tolerance || diff > tolerance {
		t.Errorf("%s of the draws = %s, want %s ± %.0f %%", what, got, want, 100*tolerance)
	}
}

func TestSampler_SameSeedSameDraws(t *testing.T) {
	p := S3Standard
	a, b, other := NewSampler(p, 7, 3), NewSampler(p, 7, 3), NewSampler(p, 7, 4)
	same, differs := true, false
	for range 100 {
		x, y, z := a.Draw("GetObject"), b.Draw("GetObject"), other.Draw("GetObject")
		same = same && x == y
		differs = differs || x != z
	}
	if !same {
		t.Error("two samplers of one seed and stream drew different delays")
	}
	if !differs {
		t.Error("two streams of one seed drew the same delays")
	}
}
