package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Diagnostics of the state store s3lock_s3 (state_store.go): each names the
// workspace, the state's S3 key, its lock, the cause and what to do.

// stateWhere names a workspace's state and its lock.
func stateWhere(s *tfstate.Store, ws string) string {
	if ws == "" {
		return fmt.Sprintf("The states in bucket %q", s.Bucket())
	}
	return fmt.Sprintf("The state of workspace %q (s3://%s/%s; its lock: s3://%s/%s/*)", ws, s.Bucket(), s.Key(ws),
		s.Bucket(), s.LockName(ws))
}

// stateFailed is a state operation that failed on the store.
func stateFailed(summary string, s *tfstate.Store, ws string, err error) diag.Diagnostic {
	objects := s.Key(tfstate.DefaultWorkspace)
	if ws != "" {
		objects = s.Key(ws)
	}
	return diag.NewErrorDiagnostic(summary, fmt.Sprintf("%s: %v", stateWhere(s, ws), err)+hintSuffix(s.Bucket(), objects, err))
}

// stateLockFailed is a lock that could not be had. A held lock shows what
// Terraform's own locks show (ID, operation, who, since when), and the
// lease's epoch and how long it has left.
func stateLockFailed(s *tfstate.Store, ws string, err error) diag.Diagnostic {
	if errors.Is(err, errInterrupted) {
		return diag.NewErrorDiagnostic("Interrupted while waiting for the state lock", fmt.Sprintf("%s: the wait "+
			"for another run's lock was %v; nothing was locked, and this run left the lock's line.", stateWhere(s, ws), err))
	}
	var held *s3lock.HeldError
	if !errors.As(err, &held) || held.Slots > 1 {
		return stateFailed("Cannot lock the state", s, ws, err)
	}
	if held.Queued {
		return diag.NewErrorDiagnostic("Workspace Already Locked", fmt.Sprintf("%s is free, but %d other run(s) queued "+
			"for it first (order = \"fifo\" or \"newest\") and were still waiting when wait_timeout ran out. Raise "+
			"wait_timeout in the state_store block (Terraform's -lock-timeout does not apply to state stores), or retry later.", stateWhere(s, ws), held.Ahead))
	}
	left := "it lapses in at most " + formatDuration(held.ExpiresIn.Round(time.Second)) + " unless its holder renews it"
	return diag.NewErrorDiagnostic("Workspace Already Locked", fmt.Sprintf("%s is locked by another run.\n\n"+
		"Lock Info:\n  ID:        %s\n  Operation: %s\n  Who:       %s\n  Holder:    %s\n  Created:   %s\n  Epoch:     %d (%s)\n\n"+
		"Wait for it: raise wait_timeout in the state_store block (Terraform's -lock-timeout does not apply to state "+
		"stores). A holder that died "+
		"needs nothing: its lease lapses by itself. To end a live run's lock now (it can no longer write the state "+
		"afterwards): terraform force-unlock %s",
		stateWhere(s, ws), tfstate.LockID(held.Epoch), held.Metadata[tfstate.MetaOperation], held.Metadata[tfstate.MetaWho],
		held.Holder, formatTime(held.AcquiredAt), held.Epoch, left, tfstate.LockID(held.Epoch)))
}

// stateUnlockFailed is an unlock, or a force-unlock, that failed.
func stateUnlockFailed(s *tfstate.Store, ws, id string, err error) diag.Diagnostic {
	var nc *tfstate.NotCurrentError
	switch {
	case errors.As(err, &nc):
		return diag.NewErrorDiagnostic("Lock ID is not the state's current lock", fmt.Sprintf("%s: %v. "+
			"Run terraform force-unlock with the ID that Terraform showed for the current lock.", stateWhere(s, ws), err))
	case errors.Is(err, s3lock.ErrLeaseLost):
		return diag.NewErrorDiagnostic("The state lock was lost during the run", fmt.Sprintf("%s: lock ID %s ended before "+
			"this run unlocked it: %v\n\nIt lapsed (the provider could not renew it in time) or was force-unlocked. "+
			"Every state write of this run after that was refused, so the state holds no write of it from then on; "+
			"if Terraform reported a failed write, it saved that state in errored.tfstate. Check the state "+
			"(terraform plan) before acting on it.", stateWhere(s, ws), id, err))
	}
	return stateFailed("Cannot unlock the state", s, ws, err)
}

// stateWriteFailed is a refused or failed state write.
func stateWriteFailed(s *tfstate.Store, ws string, err error) diag.Diagnostic {
	var stale *tfstate.StaleWriteError
	switch {
	case errors.As(err, &stale) && stale.Newer() > 0 || errors.Is(err, s3lock.ErrLeaseLost) || errors.Is(err, tfstate.ErrLeaseRanOut) ||
		errors.Is(err, tfstate.ErrAbandoned) || errors.Is(err, s3lock.ErrReleased):
		return diag.NewErrorDiagnostic("State write refused: this run no longer holds the state lock", fmt.Sprintf("%s: %v\n\n"+
			"This run's lock lapsed (a paused or suspended run, an unreachable store) or was force-unlocked, and another "+
			"run may have locked and written the state since. That state is kept: this run's write did not land, so "+
			"nothing of the other run is overwritten. Terraform saves this run's state in errored.tfstate: compare it "+
			"with the current state (terraform plan) and import or reconcile what this run created.",
			stateWhere(s, ws), err))
	case errors.As(err, &stale):
		return diag.NewErrorDiagnostic("State write refused: the state changed under this run", fmt.Sprintf("%s: %v\n\n"+
			"This run holds the state lock, but the state object is no longer what this run last read or wrote: "+
			"something that does not take the lock wrote or deleted it. The other write is kept. Terraform saves this "+
			"run's state in errored.tfstate: find out who wrote the state, then reconcile the two.", stateWhere(s, ws), err))
	}
	return stateFailed("Cannot write the state", s, ws, err)
}

// stateDeleteFailed is a workspace that was not deleted: locked by another
// run, or a failure of the store.
func stateDeleteFailed(s *tfstate.Store, ws string, err error) diag.Diagnostic {
	var held *s3lock.HeldError
	if errors.As(err, &held) {
		return diag.NewErrorDiagnostic("Workspace is locked: not deleted", fmt.Sprintf("%s is locked by another run "+
			"(lock ID %s, holder %q, operation %s), so it was not deleted. Delete it once that run is done; if the run "+
			"died, its lock lapses by itself.", stateWhere(s, ws), tfstate.LockID(held.Epoch), held.Holder,
			held.Metadata[tfstate.MetaOperation]))
	}
	return stateFailed("Cannot delete the workspace's state", s, ws, err)
}

// stateStoreSecretsOnDisk warns of secrets (their attribute names) written
// in the state_store block's provider block.
func stateStoreSecretsOnDisk(secrets []string) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Secrets in the state_store block are saved on disk", fmt.Sprintf("The "+
		"provider \"s3lock\" block in the state_store block sets %s. Terraform saves the state_store block as "+
		"written, these values included, in .terraform/terraform.tfstate and in every saved plan file (terraform "+
		"plan -out); marking them sensitive does not prevent that. Leave them out of the configuration: "+
		"credentials from the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "+
		"AWS_SESSION_TOKEN, a shared profile with profile, an assume_role block, the role of the machine or CI "+
		"job; web_identity_token_file for a web identity token), the SSE-C key from %s. Then run "+
		"terraform init -reconfigure, delete the plan files saved so far, and rotate the secrets that were on disk.",
		strings.Join(secrets, ", "), envSSECustomerKey))
}

// stateLockWaited is the warning of a state lock that was had after a wait:
// whom it waited for (the lock's holder, with Terraform's lock info, or the
// S3 backend's lock file) and how long.
func stateLockWaited(s *tfstate.Store, ws string, w lockWait) diag.Diagnostic {
	return diag.NewWarningDiagnostic("Waited for the state lock", fmt.Sprintf("%s: this run waited %s for its lock. %s",
		stateWhere(s, ws), tookFor(w.took), waitStory(w)))
}
