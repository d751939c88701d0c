package tfstate

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// DefaultWorkspace is the workspace Terraform selects unless told otherwise;
// its state is at the configured key itself.
const DefaultWorkspace = "default"

// DefaultWorkspaceKeyPrefix is where the S3 backend keeps the states of
// the other workspaces: PREFIX/WORKSPACE/KEY.
const DefaultWorkspaceKeyPrefix = "env:"

// LockSuffix is appended to a state's key to name its lock: the lock of
// s3://bucket/path/terraform.tfstate is the s3lock lock
// "path/terraform.tfstate.s3lock" (its objects are under that prefix), as
// the S3 backend's lock file is "path/terraform.tfstate.tflock".
const LockSuffix = ".s3lock"

// ValidateKey checks a state key as the S3 backend does: not empty, no
// leading or trailing slash, no empty segment; and no "." or ".." segment,
// not a lock's object (KEY.s3lock or under it, KEY.tflock), and fit to name
// its lock.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the state key is empty: give the object key of the state, e.g. \"path/terraform.tfstate\"", ErrInvalidConfig)
	case strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/"):
		return fmt.Errorf("%w: the state key %q must not begin or end with \"/\"", ErrInvalidConfig, key)
	case strings.Contains(key, "//"):
		return fmt.Errorf("%w: the state key %q has an empty path segment (\"//\")", ErrInvalidConfig, key)
	case slices.Contains(strings.Split(key, "/"), ".."), slices.Contains(strings.Split(key, "/"), "."):
		return fmt.Errorf("%w: the state key %q has a \".\" or \"..\" path segment: S3 keeps such a key as it is, "+
			"but paths and URLs read it as a step up or in place; name the state's path plainly", ErrInvalidConfig, key)
	case strings.HasSuffix(key, LockFileSuffix) || slices.ContainsFunc(strings.Split(key, "/"), isLockSegment):
		return fmt.Errorf("%w: the state key %q names a lock's object (a state's lock is KEY%s, the s3 backend's lock "+
			"file KEY%s), not a state", ErrInvalidConfig, key, LockSuffix, LockFileSuffix)
	}
	if err := s3lock.ValidateName(key + LockSuffix); err != nil {
		return fmt.Errorf("%w: the state key %q cannot name its lock %q: %w", ErrInvalidConfig, key, key+LockSuffix, err)
	}
	// The key is itself held to a lock name's rules: a state at
	// "locks/lock-0000000002.json" would be read as epoch 2 of the lock
	// "locks" (and force-releasing that epoch would overwrite the state),
	// one at "x/lock-line" would sit where the line of the lock "x" is.
	if err := s3lock.ValidateName(key); err != nil {
		return fmt.Errorf("%w: the state key %q would sit among a lock's objects: %w", ErrInvalidConfig, key, err)
	}
	return nil
}

// isLockSegment reports whether a segment of a key is a lock's name (its
// objects are under it).
func isLockSegment(segment string) bool { return strings.HasSuffix(segment, LockSuffix) }

// StateKey is the object key of workspace ws's state for the configured
// key, as the S3 backend lays them out: key itself for the default
// workspace, prefix/ws/key for the others.
func StateKey(prefix, ws, key string) string {
	if ws == DefaultWorkspace {
		return key
	}
	return prefix + "/" + ws + "/" + key
}

// ValidateWorkspace checks a workspace name as Terraform does (it must be
// its own URL path escape: no "/" and nothing that needs escaping), and
// refuses "." and "..", which S3 keeps but paths read as steps.
func ValidateWorkspace(ws string) error {
	switch {
	case ws == "":
		return fmt.Errorf("%w: the workspace name is empty", ErrInvalidConfig)
	case ws == "." || ws == "..":
		return fmt.Errorf("%w: the workspace name %q is a path step, not a name", ErrInvalidConfig, ws)
	case url.PathEscape(ws) != ws:
		return fmt.Errorf("%w: the workspace name %q is not one Terraform takes: no \"/\", spaces or characters "+
			"a URL path would escape", ErrInvalidConfig, Printable(ws))
	}
	return nil
}

// ValidateWorkspaceKeyPrefix checks a workspace key prefix: as the S3
// backend does, no leading or trailing slash and no empty segment; and not
// empty (the S3 backend would then keep workspace WS at WS/KEY, which a
// default key with a "/" in it cannot be told apart from).
func ValidateWorkspaceKeyPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("%w: workspace_key_prefix is empty: the states of workspaces need a prefix of their own "+
			"(the s3 backend's default is %q); leave it unset for that", ErrInvalidConfig, DefaultWorkspaceKeyPrefix)
	case strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") || strings.Contains(prefix, "//"):
		return fmt.Errorf("%w: workspace_key_prefix %q must not begin or end with \"/\" or contain \"//\"", ErrInvalidConfig, prefix)
	}
	return nil
}

// checkWorkspace refuses a workspace whose state the store would not keep:
// a name ValidateWorkspace refuses ("..", "a/b", control characters), or
// one whose state key ValidateKey refuses (too long to name its lock, a
// segment that names a lock). Every operation on a workspace checks it
// first, so that no such name reaches a key (a workspace ".." wrote to
// env:/../KEY before).
func (s *Store) checkWorkspace(ws string) error {
	if ws == DefaultWorkspace {
		return nil
	}
	if err := ValidateWorkspace(ws); err != nil {
		return err
	}
	if err := ValidateKey(s.Key(ws)); err != nil {
		return fmt.Errorf("the workspace %q cannot keep its state: %w", ws, err)
	}
	return nil
}

// Key is the object key of a workspace's state, as the S3 backend lays
// them out.
func (s *Store) Key(ws string) string { return StateKey(s.cfg.WorkspaceKeyPrefix, ws, s.cfg.Key) }

// LockName is the s3lock lock of a workspace's state.
func (s *Store) LockName(ws string) string { return s.Key(ws) + LockSuffix }

// Workspaces lists the workspaces that have a state, the default first
// (always, as with the S3 backend: its state exists once written). A state
// under a name the store refuses (checkWorkspace: written by hand, or by an
// older store that took "..") is not listed: no operation could use it.
func (s *Store) Workspaces(ctx context.Context) ([]string, error) {
	prefix := s.cfg.WorkspaceKeyPrefix + "/"
	names := []string{}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(prefix), ExpectedBucketOwner: s.owner()}
	for p := s3.NewListObjectsV2Paginator(s.api, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.opError("listing the workspaces under", prefix, err)
		}
		for _, o := range page.Contents {
			ws, rest, ok := strings.Cut(strings.TrimPrefix(aws.ToString(o.Key), prefix), "/")
			if ok && rest == s.cfg.Key && ws != DefaultWorkspace && s.checkWorkspace(ws) == nil {
				names = append(names, ws)
			}
		}
	}
	slices.Sort(names)
	return append([]string{DefaultWorkspace}, slices.Compact(names)...), nil
}

// owner is the ExpectedBucketOwner of the store's own requests.
func (s *Store) owner() *string {
	if s.cfg.ExpectedBucketOwner == "" {
		return nil
	}
	return aws.String(s.cfg.ExpectedBucketOwner)
}

func (s *Store) opError(doing, key string, err error) error {
	return fmt.Errorf("%s s3://%s/%s: %w", doing, s.cfg.Bucket, key, err)
}
