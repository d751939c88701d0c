package tfstate

import "time"

// TransferTimeout is transferTimeout: how long a state transfer of n bytes
// may take.
func TransferTimeout(n int64) time.Duration { return transferTimeout(n) }

// SetLimitsForTest replaces the store's MaxStateSize by maxState (0: keep
// it) and its transferTimeout by timeout (nil: keep it).
func SetLimitsForTest(s *Store, maxState int64, timeout func(size int64) time.Duration) {
	if maxState > 0 {
		s.maxState = maxState
	}
	if timeout != nil {
		s.timeout = timeout
	}
}
