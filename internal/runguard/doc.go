// Package runguard holds the provider's ephemeral leases for a whole
// Terraform run.
// (Not the CLI's watchdog, which watches the command of `s3lock run`:
// cmd/s3lock/watchdog_linux.go.)
//
// Terraform (1.11 to 1.16) and OpenTofu (1.12) start a new provider process
// for each phase of a command — the schema, validate, plan, apply — one after
// another, each a direct child of the terraform process, and stop it at the
// end of its graph walk; no provider process is alive while `terraform
// apply` waits for "yes", and none runs during `terraform destroy`'s destroy
// walks. An ephemeral resource opened by one process is closed at the end of
// its phase. TERRAFORM-PROCESSES.md beside this file has the measurements.
//
// A lock that must cover the whole run therefore lives in a process of its
// own: the run guard, the provider binary started with GuardArg by the first
// provider process that opens a lease in a run, in a session of its own. It
// listens on a unix socket named after the run (the terraform process's pid
// and start time, the host's boot id and the pid namespace) in a directory
// only the user can read. Provider processes hand it the leases they acquire and ask it about
// them; Terraform's Close only ends a phase. The guard renews the leases and
// watches the terraform process:
//   - when terraform exits (success, failure, Ctrl-C, a plan-only run, a
//     declined approval), every provider process has been shut down first
//     and said goodbye, and no process terraform started is left: the guard
//     releases the leases at once and exits;
//   - when terraform dies without shutting its providers down (SIGKILL), a
//     provider process went away without a goodbye, or is left behind (it
//     tells the guard it is orphaned), or another process of the run
//     outlives it (a descendant, or an orphan of the run left in terraform's
//     process group): the guard stops renewing and exits without releasing,
//     so the leases lapse after their duration — whatever that run started
//     may still be going on;
//   - the leases are the run's, not the connection's that brought one in
//     (the plan's provider process adopts a lease the apply's uses): a
//     connection that closes without a goodbye releases nothing and stops
//     nothing; the guard goes on renewing while terraform runs, and the run's
//     end then lets the leases lapse, as above. A closed connection is what a
//     killed provider leaves (terraform killed with its process group, or the
//     provider dying of SIGPIPE after it), and lapsing errs on the safe side:
//     the lock stays taken one lease duration longer, never freed while
//     something of the run may still be at work. A connection that made no
//     request after its hello is no provider at work (a provider connects to
//     claim a lease or ask about one) and does not count;
//   - when a lease is lost (renewals failing past its deadline, a
//     force-release), the guard tells terraform on its standard error and
//     interrupts it as Ctrl-C does, so the run starts no further changes.
//
// Runs are told apart by the terraform process — its pid, start time, the
// host's boot and its pid namespace —, so two runs never share a lease, even
// in one shell, or in two containers that share /tmp with terraform as pid 1
// in each. The guard admits only processes of its user whose parent is its
// run's terraform (the kernel's peer credentials), and a provider names its
// run when it connects, so that one that reaches another run's guard is
// refused; the provider in turn talks only to a guard of its own user.
// Admitted are a local-exec command and another plugin as much as a
// provider, so the guard trusts a request no further than it proves: it
// takes a lease over only by the full token of an acquisition, never an
// epoch by number (it would take over another holder's lease while that
// holder went on renewing it), and reads no line longer than 64 KiB.
//
// When terraform is the init process of its pid namespace (a container's
// entrypoint), the kernel ends the guard together with terraform: the guard
// holds the lease for the whole run, and it lapses after the run (the
// provider warns). The guard works on Linux (/proc) and macOS (sysctl), whose
// process facts it reads through internal/procfacts; ForProvider says why it cannot run elsewhere (Windows), in a provider that
// terraform did not start, or with S3LOCK_RUN_GUARD=off: the provider then
// fails a lease that asks for the whole run.
package runguard
