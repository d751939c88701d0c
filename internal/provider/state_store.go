package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/statestore"
	"github.com/hashicorp/terraform-plugin-framework/statestore/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The state store's defaults: the ephemeral lease's (it is held for one
// Terraform command too).
const (
	defaultStateLeaseDuration = defaultEphemeralLeaseDuration
	defaultStateWaitTimeout   = defaultWaitTimeout
)

// parentPoll is how often a state store checks that its Terraform process
// still runs: once it is gone, its leases are left to lapse.
const parentPoll = time.Second

// NewStateStore is the state store s3lock_s3: Terraform states in S3 under
// the S3 backend's keys, locked by s3lock leases, written fenced
// (internal/tfstate, PROTOCOL.md §15).
func NewStateStore() statestore.StateStore { return &stateStore{} }

type stateStore struct {
	store *tfstate.Store
	waits *stateWaits
}

// stateStoreData is what Initialize hands to Configure: the store, and the
// recorder its wait observer reports to.
type stateStoreData struct {
	store *tfstate.Store
	waits *stateWaits
}

// stateWaits records the wait of the Lock in progress (Terraform locks one
// state at a time), for the warning that names whom it waited for and for
// the log: the store's wait observer is set once, in Initialize.
type stateWaits struct {
	now func() time.Time
	mu  sync.Mutex
	ctx context.Context //nolint:containedctx // the Lock in progress's, for its log
	rec *waitRecorder
}

// begin starts recording the wait of a Lock.
func (w *stateWaits) begin(ctx context.Context) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctx, w.rec = ctx, newWaitRecorder(w.now)
}

// observe is the store's wait observer.
func (w *stateWaits) observe(held error) {
	w.mu.Lock()
	ctx, rec := w.ctx, w.rec
	w.mu.Unlock()
	if rec == nil {
		return
	}
	if rec.observe(held) {
		tflog.Info(ctx, "state lock is held; waiting for it", map[string]any{"held": held.Error()})
	}
}

// end ends the recording and returns what it saw.
func (w *stateWaits) end() lockWait {
	if w == nil {
		return lockWait{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rec := w.rec
	w.ctx, w.rec = nil, nil
	if rec == nil {
		return lockWait{}
	}
	return rec.done()
}

var (
	_ statestore.StateStoreWithConfigure      = (*stateStore)(nil)
	_ statestore.StateStoreWithValidateConfig = (*stateStore)(nil)
)

type stateStoreModel struct {
	Bucket             types.String `tfsdk:"bucket"`
	Key                types.String `tfsdk:"key"`
	WorkspaceKeyPrefix types.String `tfsdk:"workspace_key_prefix"`
	LeaseDuration      types.String `tfsdk:"lease_duration"`
	MaxHold            types.String `tfsdk:"max_hold"`
	WaitTimeout        types.String `tfsdk:"wait_timeout"`
	Order              types.String `tfsdk:"order"`
}

func (s *stateStore) Metadata(_ context.Context, req statestore.MetadataRequest, resp *statestore.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_s3" // state_store "s3lock_s3"
}

func (s *stateStore) Schema(_ context.Context, _ statestore.SchemaRequest, resp *statestore.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Keeps Terraform states in an S3 bucket, under the keys Terraform's `s3` backend uses, " +
			"locked by an s3lock lease that renews while Terraform runs and lapses if it dies (no " +
			"`force-unlock` needed after a crash), with waiters served in order, and **fenced writes**: " +
			"a run whose lease ended (paused past it, force-unlocked) can no longer write the state, even a " +
			"write already on its way. Plans (`terraform plan`, with or without `-out`) share the lock and write " +
			"nothing; every other operation holds it alone and waits for the plans. The connection, credentials and encryption (`encrypt`, `kms_key_id`, " +
			"`sse_customer_key`, `acl`) are the `provider \"s3lock\"` block's, nested in the `state_store` " +
			"block; give it the credentials and the SSE-C key through the environment (`AWS_ACCESS_KEY_ID`..., " +
			"`AWS_SSE_CUSTOMER_KEY`), a profile or a role, not as values in the block: Terraform saves the block, " +
			"secrets included, in `.terraform/terraform.tfstate` and in plan files. Experimental in Terraform: needs a Terraform with pluggable state storage (1.15 and later " +
			"built with experiments, `TF_ENABLE_PLUGGABLE_STATE_STORAGE=1`); see the guide " +
			"\"State in S3 with a lock that lapses and fenced writes\".",
		Attributes: map[string]schema.Attribute{
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket that holds the states and their locks.",
				Required:            true,
				Validators:          []validator.String{bucketValidator()},
			},
			"key": schema.StringAttribute{
				MarkdownDescription: "Key of the default workspace's state, such as `network/terraform.tfstate`, as " +
					"in the `s3` backend. Its lock is the s3lock lock `KEY.s3lock` (objects under that prefix).",
				Required:   true,
				Validators: []validator.String{stateKeyValidator()},
			},
			"workspace_key_prefix": schema.StringAttribute{
				MarkdownDescription: "Prefix of the other workspaces' states: `PREFIX/WORKSPACE/KEY`, as in the `s3` " +
					"backend. Default `\"" + tfstate.DefaultWorkspaceKeyPrefix + "\"`.",
				Optional:   true,
				Validators: []validator.String{workspacePrefixValidator()},
			},
			"lease_duration": schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("How long a state lock's lease stays valid unless renewed, as a duration "+
					"such as `\"90s\"` (between %s and %s). The provider renews it every third of this while "+
					"Terraform runs; when Terraform dies, the lock lapses after this. Default `%q`.",
					formatDuration(s3lock.MinLeaseDuration), formatDuration(s3lock.MaxLeaseDuration), defaultStateLeaseDuration),
				Optional:   true,
				Validators: []validator.String{durationValidator{min: s3lock.MinLeaseDuration, max: s3lock.MaxLeaseDuration}},
			},
			maxHoldAttr: schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("The longest a state lock is held: its lease is not renewed past "+
					"`max_hold` after the lock was taken, however long the run takes, so that a run that hangs "+
					"cannot keep the state for ever. A duration longer than `lease_duration`, such as `\"4h\"` "+
					"(at most %s, a year). A run that holds the lock longer loses it mid-run and fails closed: its later "+
					"state writes are refused and its unlock reports the loss (the lock is released, so the next run "+
					"need not wait for it to lapse), while another run may take the state. Give it well "+
					"over the longest `apply` you run. Unset (the default): no cap.", formatDuration(maxMaxHold)),
				Optional:   true,
				Validators: []validator.String{maxHoldValidator},
			},
			"wait_timeout": schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("How long one lock attempt waits while another run holds the state, as a "+
					"duration such as `\"10m\"`; `\"0s\"` fails at once, as Terraform's own locks do. This is the "+
					"wait: Terraform's `-lock-timeout` retries only the locks of backends (Terraform 1.16), not a "+
					"state store's. Ctrl-C ends the wait. Default `%q`.", defaultStateWaitTimeout),
				Optional:   true,
				Validators: []validator.String{durationValidator{min: minWaitTimeout, max: maxWaitTimeout, allowZero: true}},
			},
			"order": schema.StringAttribute{
				MarkdownDescription: orderDescription("`wait_timeout`", ""),
				Optional:            true,
				Validators:          []validator.String{orderValidator()},
			},
		},
	}
}

// ValidateConfig refuses a max_hold that does not outlast lease_duration.
func (s *stateStore) ValidateConfig(ctx context.Context, req statestore.ValidateConfigRequest, resp *statestore.ValidateConfigResponse) {
	var cfg stateStoreModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d := checkMaxHold(cfg.MaxHold, cfg.LeaseDuration, defaultStateLeaseDuration, ""); d != nil {
		resp.Diagnostics.Append(d)
	}
}

func (s *stateStore) Initialize(ctx context.Context, req statestore.InitializeRequest, resp *statestore.InitializeResponse) {
	var cfg stateStoreModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	f, err := factoryFrom(req.ProviderData, "state store")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	bucket := cfg.Bucket.ValueString()
	client, ok := f.client(ctx, bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	tc := tfstate.Config{Bucket: bucket, Key: cfg.Key.ValueString(), WorkspaceKeyPrefix: cfg.WorkspaceKeyPrefix.ValueString(),
		Objects: f.guardConfig.Objects, ExpectedBucketOwner: f.guardConfig.ExpectedBucketOwner, Who: lockWho(), Gone: terraformGone()}
	waits := &stateWaits{now: f.now}
	tc.WaitObserver = waits.observe
	if tc.Lease, err = parseDuration("lease_duration", cfg.LeaseDuration, mustDuration(defaultStateLeaseDuration)); err == nil {
		tc.Wait, err = parseDuration("wait_timeout", cfg.WaitTimeout, mustDuration(defaultStateWaitTimeout))
	}
	if err == nil {
		tc.MaxHold, err = parseDuration(maxHoldAttr, cfg.MaxHold, 0)
	}
	if err == nil {
		tc.Order, err = parseOrder(cfg.Order)
	}
	if err != nil {
		resp.Diagnostics.Append(invalidSetting(path.Empty(), err))
		return
	}
	store, err := tfstate.New(f.api, client, tc)
	if err != nil {
		resp.Diagnostics.Append(invalidSetting(path.Empty(), err))
		return
	}
	if len(f.secrets) > 0 {
		resp.Diagnostics.Append(stateStoreSecretsOnDisk(f.secrets))
	}
	resp.StateStoreData = &stateStoreData{store: store, waits: waits}
}

// inlineSecrets names the secrets a provider block sets itself rather than
// leaving to the environment, a file or a role. In a state_store block
// they end up on disk: Terraform saves that block's configuration as
// written, in .terraform/terraform.tfstate and in plan files, whatever the
// schema marks sensitive. A warning, not a refusal: it is no lock guarantee
// that fails, and configurations that work today keep working.
func inlineSecrets(cfg providerModelV0) []string {
	var names []string
	set := func(name string, v types.String) {
		if !v.IsNull() && !v.IsUnknown() && v.ValueString() != "" {
			names = append(names, name)
		}
	}
	set("access_key", cfg.AccessKey)
	set("secret_key", cfg.SecretKey)
	set("token", cfg.Token)
	if w := cfg.AssumeRoleWithWebIdentity; w != nil {
		set("assume_role_with_web_identity.web_identity_token", w.WebIdentityToken)
	}
	set("sse_customer_key", cfg.SSECustomerKey)
	return names
}

func (s *stateStore) Configure(_ context.Context, req statestore.ConfigureRequest, resp *statestore.ConfigureResponse) {
	if req.StateStoreData == nil {
		return
	}
	data, ok := req.StateStoreData.(*stateStoreData)
	if !ok {
		resp.Diagnostics.Append(unexpectedProviderData(fmt.Errorf("the state store expected data of type *stateStoreData but got %T; "+
			"this is a bug in the provider, please report it", req.StateStoreData)))
		return
	}
	s.store, s.waits = data.store, data.waits
}

func (s *stateStore) GetStates(ctx context.Context, _ statestore.GetStatesRequest, resp *statestore.GetStatesResponse) {
	if s.store == nil {
		resp.Diagnostics.Append(notConfigured())
		return
	}
	ids, err := s.store.Workspaces(ctx)
	if err != nil {
		resp.Diagnostics.Append(stateFailed("Cannot list the workspaces", s.store, "", err))
		return
	}
	resp.StateIDs = ids
}

func (s *stateStore) DeleteState(ctx context.Context, req statestore.DeleteStateRequest, resp *statestore.DeleteStateResponse) {
	if s.store == nil {
		resp.Diagnostics.Append(notConfigured())
		return
	}
	if err := s.store.Delete(ctx, req.StateID); err != nil {
		resp.Diagnostics.Append(stateDeleteFailed(s.store, req.StateID, err))
	}
}

func (s *stateStore) Lock(ctx context.Context, req statestore.LockRequest, resp *statestore.LockResponse) {
	if s.store == nil {
		resp.Diagnostics.Append(notConfigured())
		return
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	s.waits.begin(ctx)
	id, err := s.store.Lock(ctx, req.StateID, req.Operation)
	waited := s.waits.end()
	if err != nil {
		if errors.Is(context.Cause(ctx), errInterrupted) {
			err = errInterrupted
		}
		resp.Diagnostics.Append(stateLockFailed(s.store, req.StateID, err))
		return
	}
	resp.LockID = id
	if waited.waited() {
		// Terraform 1.16 shows only "Acquiring state lock" while this
		// waits, and drops a LockState's warnings (the framework logs
		// them at WARN); a Terraform that shows them names the holder.
		resp.Diagnostics.Append(stateLockWaited(s.store, req.StateID, waited))
	}
}

func (s *stateStore) Unlock(ctx context.Context, req statestore.UnlockRequest, resp *statestore.UnlockResponse) {
	if s.store == nil {
		resp.Diagnostics.Append(notConfigured())
		return
	}
	if err := s.store.Unlock(ctx, req.StateID, req.LockID); err != nil {
		resp.Diagnostics.Append(stateUnlockFailed(s.store, req.StateID, req.LockID, err))
	}
}

func (s *stateStore) Read(ctx context.Context, req statestore.ReadRequest, resp *statestore.ReadResponse) {
	if s.store == nil {
		resp.Diagnostics.Append(notConfigured())
		return
	}
	b, err := s.store.Read(ctx, req.StateID)
	if err != nil {
		resp.Diagnostics.Append(stateFailed("Cannot read the state", s.store, req.StateID, err))
		return
	}
	resp.StateBytes = b
}

func (s *stateStore) Write(ctx context.Context, req statestore.WriteRequest, resp *statestore.WriteResponse) {
	if s.store == nil {
		resp.Diagnostics.Append(notConfigured())
		return
	}
	if err := s.store.Write(ctx, req.StateID, req.StateBytes); err != nil {
		resp.Diagnostics.Append(stateWriteFailed(s.store, req.StateID, err))
	}
}

// lockWho is "user@host" (what Terraform's own lock info shows), or as
// much of it as is known.
func lockWho() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name == "":
		return host
	case host == "":
		return name
	}
	return name + "@" + host
}

// terraformGone returns a channel that closes once the process that
// started the provider (Terraform) is gone: a SIGKILLed Terraform tells its
// provider nothing (internal/runguard/TERRAFORM-PROCESSES.md), and the
// provider is re-parented. One poll per process, started by the first call,
// for as long as the process lives. (Where the run guard follows the run,
// main's own poll also makes the process exit then; this one is for the
// processes without it: S3LOCK_RUN_GUARD=off, a debugger, Windows.)
var terraformGone = sync.OnceValue(func() <-chan struct{} {
	gone, ppid := make(chan struct{}), os.Getppid()
	go func() {
		for range time.Tick(parentPoll) {
			if os.Getppid() != ppid {
				close(gone)
				return
			}
		}
	}()
	return gone
})

// stateKeyValidator checks a state key as the s3 backend does.
func stateKeyValidator() validator.String {
	return ruleValidator{description: "an S3 key without a leading or trailing \"/\" and without \".\" or \"..\" segments", rule: tfstate.ValidateKey, report: settingRejected}
}

// workspacePrefixValidator checks a workspace key prefix as the s3 backend does.
func workspacePrefixValidator() validator.String {
	return ruleValidator{description: "a key prefix without a leading or trailing \"/\"", rule: tfstate.ValidateWorkspaceKeyPrefix, report: settingRejected}
}

// settingRejected is invalidSetting as a ruleValidator reports it.
func settingRejected(p path.Path, _ string, err error) diag.Diagnostic { return invalidSetting(p, err) }
