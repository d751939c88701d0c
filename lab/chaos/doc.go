// Package chaos is the proof lab's chaos suite (chaos/README.md): separate
// OS processes (SDK workers and `s3lock run`) contend for one lock on a real
// versitygw server while the suite pauses, kills and partitions them,
// restarts the store and skews their clocks. Under the lock each process
// increments a register object with the SDK's fence.Put and records
// every step (chaos/internal/record).
//
// This package holds the checks of the recorded history, which the tests
// also feed deliberately bad histories:
//   - CheckLinearizable: the register's reads and writes are linearizable
//     (porcupine, with a compare-and-swap model of the increment);
//   - CheckExclusive: no two critical sections overlap while both their
//     leases were trusted;
//   - CheckEpochOrder: epochs strictly increase in the order critical
//     sections began.
//
// The chaos runs themselves are the tests TestChaos*, which need
// S3LOCK_CHAOS=1 (make chaos).
package chaos
