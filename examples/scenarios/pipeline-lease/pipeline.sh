#!/usr/bin/env bash
# A deployment pipeline that holds one lock across several steps.
set -euo pipefail
run_id="${CI_PIPELINE_ID:-local-$(date +%s)}"

# Step 1: take the lock (waits while another pipeline holds it). Each run
# has a state of its own (here a workspace named by the run): runs that
# shared one would share one lease.
terraform -chdir=lock init -input=false
terraform -chdir=lock workspace select -or-create "run-${run_id}"
terraform -chdir=lock apply -input=false -auto-approve -var "pipeline_run=${run_id}"
epoch="$(terraform -chdir=lock output -raw epoch)"

# Steps 2..n: work that checks it still holds the lock.
terraform -chdir=migrate init -input=false
terraform -chdir=migrate apply -input=false -auto-approve -var "epoch=${epoch}"

# Between long steps, re-applying step 1 renews the lease in place once it is
# within renew_before of its expiry (an empty plan otherwise).
terraform -chdir=lock apply -input=false -auto-approve -var "pipeline_run=${run_id}"

# Last step: release the lock, and drop the run's workspace.
terraform -chdir=lock destroy -input=false -auto-approve -var "pipeline_run=${run_id}"
terraform -chdir=lock workspace select default
terraform -chdir=lock workspace delete "run-${run_id}"
