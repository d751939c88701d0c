package latency

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Sampler draws delays from a profile with a seeded generator of its own.
// It is safe for concurrent use.
type Sampler struct {
	p   *Profile
	mu  sync.Mutex
	rng *rand.Rand
}

// NewSampler returns a sampler of p whose draws are fixed by seed and
// stream: each proxy of a run that delays requests draws from its own
// stream.
func NewSampler(p *Profile, seed, stream uint64) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(seed, stream))}
}

// Draw returns the delay of one request of operation op (as s3test.Operation
// names it).
func (s *Sampler) Draw(op string) time.Duration {
	d := s.p.Classes[ClassOf(op)]
	if d.Median <= 0 {
		return 0
	}
	s.mu.Lock()
	z := s.rng.NormFloat64()
	s.mu.Unlock()
	v := float64(d.Median) * math.Exp(d.sigma()*z)
	return time.Duration(min(v, float64(s.p.Ceiling)))
}
