package awsclient

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts/types"
)

// The bounds STS puts on a role session, checked before any request so that
// a wrong value is reported with the setting rather than as an STS error.
const (
	// MinRoleDuration and MaxRoleDuration bound the duration of a role
	// session (the S3 backend's range; STS's own maximum may be lower for a
	// role).
	MinRoleDuration = 15 * time.Minute
	MaxRoleDuration = 12 * time.Hour
	// MaxPolicyARNs is how many managed policies STS accepts for a session.
	MaxPolicyARNs = 10
	// MaxSessionTags is how many session tags STS accepts.
	MaxSessionTags = 50
)

// Environment variables that AssumeRoleWithWebIdentity falls back to, as the
// S3 backend's assume_role_with_web_identity block and the AWS SDKs do.
const (
	EnvRoleARN              = "AWS_ROLE_ARN"
	EnvWebIdentityTokenFile = "AWS_WEB_IDENTITY_TOKEN_FILE"
	EnvRoleSessionName      = "AWS_ROLE_SESSION_NAME"
)

// AssumeRole names an IAM role to assume through STS AssumeRole, with the
// meanings of the S3 backend's assume_role block.
type AssumeRole struct {
	// RoleARN is the role to assume (required).
	RoleARN string
	// SessionName names the role session in CloudTrail (default
	// DefaultSessionName).
	SessionName string
	// ExternalID is passed to STS when the role's trust policy requires one.
	ExternalID string
	// Duration of the role session; zero for STS's default (one hour),
	// otherwise between MinRoleDuration and MaxRoleDuration. Credentials are
	// refreshed before they expire.
	Duration time.Duration
	// Policy is an IAM policy (JSON) that further restricts the session.
	Policy string
	// PolicyARNs are managed IAM policies that further restrict the session
	// (at most MaxPolicyARNs).
	PolicyARNs []string
	// Tags are session tags (at most MaxSessionTags).
	Tags map[string]string
	// TransitiveTagKeys are the keys of Tags that pass on to sessions of
	// roles assumed from this one.
	TransitiveTagKeys []string
	// SourceIdentity is the source identity the session carries.
	SourceIdentity string
}

// WebIdentity says how to assume a role with STS AssumeRoleWithWebIdentity,
// with the meanings of the S3 backend's assume_role_with_web_identity block.
// Empty fields fall back to the environment: RoleARN to AWS_ROLE_ARN,
// SessionName to AWS_ROLE_SESSION_NAME, and the token, when neither
// WebIdentityToken nor WebIdentityTokenFile is set, to the file named by
// AWS_WEB_IDENTITY_TOKEN_FILE.
type WebIdentity struct {
	// RoleARN is the role to assume (required, here or in AWS_ROLE_ARN).
	RoleARN string
	// WebIdentityToken is the OIDC or OAuth token itself. It excludes
	// WebIdentityTokenFile, and never appears in an error of this package.
	WebIdentityToken string
	// WebIdentityTokenFile is a file with the token, read again whenever
	// the credentials are refreshed (CI runners and Kubernetes rotate it).
	WebIdentityTokenFile string
	// SessionName names the role session (default DefaultSessionName).
	SessionName string
	// Duration of the role session, as for AssumeRole.Duration.
	Duration time.Duration
	// Policy and PolicyARNs further restrict the session, as for AssumeRole.
	Policy     string
	PolicyARNs []string
}

// withEnvironment fills the empty fields from the environment.
func (w WebIdentity) withEnvironment() WebIdentity {
	if w.RoleARN == "" {
		w.RoleARN = os.Getenv(EnvRoleARN)
	}
	if w.WebIdentityToken == "" && w.WebIdentityTokenFile == "" {
		w.WebIdentityTokenFile = os.Getenv(EnvWebIdentityTokenFile)
	}
	if w.SessionName == "" {
		w.SessionName = os.Getenv(EnvRoleSessionName)
	}
	return w
}

// roleNamePattern is what STS accepts as a role session name or a source
// identity.
var roleNamePattern = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

// externalIDPattern is what STS accepts as an external id, of 2 to
// maxExternalID characters (Go's regexp repeats at most 1000 times).
var externalIDPattern = regexp.MustCompile(`^[\w+=,.@:/-]+$`)

const maxExternalID = 1224

func (o Options) validateRoles() error {
	if w := o.AssumeRoleWithWebIdentity; w != nil {
		if err := w.validate(); err != nil {
			return fmt.Errorf("assume role with web identity: %w", err)
		}
	}
	if ar := o.AssumeRole; ar != nil {
		if err := ar.validate(); err != nil {
			return fmt.Errorf("assume role: %w", err)
		}
	}
	return nil
}

func (ar AssumeRole) validate() error {
	if ar.RoleARN == "" {
		return fmt.Errorf("a role ARN is required")
	}
	if err := validateSession(ar.RoleARN, ar.SessionName, ar.Duration, ar.Policy, ar.PolicyARNs); err != nil {
		return err
	}
	if ar.ExternalID != "" && (len(ar.ExternalID) < 2 || len(ar.ExternalID) > maxExternalID ||
		!externalIDPattern.MatchString(ar.ExternalID)) {
		return fmt.Errorf("external id %q is not 2 to 1224 letters, digits or +=,.@:/-", ar.ExternalID)
	}
	if ar.SourceIdentity != "" {
		if err := ValidateSessionName(ar.SourceIdentity); err != nil {
			return fmt.Errorf("source identity %w", err)
		}
	}
	if len(ar.Tags) > MaxSessionTags {
		return fmt.Errorf("%d session tags are more than the %d STS accepts", len(ar.Tags), MaxSessionTags)
	}
	for k, v := range ar.Tags {
		if k == "" || len(k) > 128 || len(v) > 256 {
			return fmt.Errorf("session tag %q = %q: keys have 1 to 128 characters, values at most 256", k, v)
		}
	}
	for _, k := range ar.TransitiveTagKeys {
		if _, ok := ar.Tags[k]; !ok {
			return fmt.Errorf("transitive tag key %q is not one of the session tags: add the tag, or drop the key", k)
		}
	}
	return nil
}

func (w WebIdentity) validate() error {
	switch {
	case w.RoleARN == "":
		return fmt.Errorf("a role ARN is required: set it, or %s in the environment", EnvRoleARN)
	case w.WebIdentityToken != "" && w.WebIdentityTokenFile != "":
		return fmt.Errorf("a web identity token and a token file exclude each other: give one")
	case w.WebIdentityToken == "" && w.WebIdentityTokenFile == "":
		return fmt.Errorf("a web identity token or a token file is required: set one, or %s in the environment",
			EnvWebIdentityTokenFile)
	}
	if err := validateSession(w.RoleARN, w.SessionName, w.Duration, w.Policy, w.PolicyARNs); err != nil {
		return err
	}
	if w.WebIdentityTokenFile != "" {
		if err := readable("web identity token file", w.WebIdentityTokenFile); err != nil {
			return err
		}
	}
	return nil
}

// validateSession checks what AssumeRole and AssumeRoleWithWebIdentity share.
func validateSession(roleARN, sessionName string, d time.Duration, policy string, policyARNs []string) error {
	if err := ValidateARN(roleARN); err != nil {
		return fmt.Errorf("role %w", err)
	}
	if sessionName != "" {
		if err := ValidateSessionName(sessionName); err != nil {
			return fmt.Errorf("session name %w", err)
		}
	}
	if err := ValidateRoleDuration(d); err != nil {
		return err
	}
	if policy != "" {
		if err := ValidatePolicy(policy); err != nil {
			return err
		}
	}
	if len(policyARNs) > MaxPolicyARNs {
		return fmt.Errorf("%d policy ARNs are more than the %d STS accepts", len(policyARNs), MaxPolicyARNs)
	}
	for _, a := range policyARNs {
		if err := ValidateARN(a); err != nil {
			return fmt.Errorf("policy %w", err)
		}
	}
	return nil
}

// ValidateARN checks that s is an ARN: arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE,
// with a partition, a service and a resource (S3-compatible stores use
// partitions of their own, such as arn:minio:iam:::role/locks).
func ValidateARN(s string) error {
	a, err := arn.Parse(s)
	if err != nil || a.Partition == "" || a.Service == "" || a.Resource == "" {
		return fmt.Errorf("ARN %q is not of the form arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE, "+
			"e.g. arn:aws:iam::123456789012:role/locks", s)
	}
	return nil
}

// ValidateSessionName checks a role session name (or a source identity):
// 2 to 64 letters, digits or +=,.@-.
func ValidateSessionName(name string) error {
	if !roleNamePattern.MatchString(name) {
		return fmt.Errorf("%q is not 2 to 64 letters, digits or +=,.@-", name)
	}
	return nil
}

// ValidatePolicy checks that policy is an IAM policy document: a JSON object.
func ValidatePolicy(policy string) error {
	var doc map[string]any
	if err := json.Unmarshal([]byte(policy), &doc); err != nil {
		return fmt.Errorf("the session policy is not a JSON object (%v): give an IAM policy document, "+
			`e.g. {"Version":"2012-10-17","Statement":[...]}`, err)
	}
	return nil
}

// ValidateRoleDuration checks a role session duration: zero (STS's default)
// or between MinRoleDuration and MaxRoleDuration.
func ValidateRoleDuration(d time.Duration) error {
	if d != 0 && (d < MinRoleDuration || d > MaxRoleDuration) {
		return fmt.Errorf("role session duration %s is outside [15m, 12h]", d)
	}
	return nil
}

// assumeRoles replaces the credentials of cfg with those of the roles:
// first the web identity's, then AssumeRole's on top of whatever the
// credentials are by then, as the S3 backend chains them.
func (o Options) assumeRoles(cfg *aws.Config) {
	if w := o.AssumeRoleWithWebIdentity; w != nil {
		var token stscreds.IdentityTokenRetriever = stscreds.IdentityTokenFile(w.WebIdentityTokenFile)
		if w.WebIdentityToken != "" {
			token = staticToken(w.WebIdentityToken)
		}
		provider := stscreds.NewWebIdentityRoleProvider(STSClient(*cfg, o), w.RoleARN, token,
			func(wo *stscreds.WebIdentityRoleOptions) {
				wo.RoleSessionName = orDefaultName(w.SessionName)
				wo.Duration = w.Duration
				if w.Policy != "" {
					wo.Policy = aws.String(w.Policy)
				}
				wo.PolicyARNs = policyDescriptors(w.PolicyARNs)
			})
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
	if ar := o.AssumeRole; ar != nil {
		// The STS client signs AssumeRole with the credentials cfg has now.
		provider := stscreds.NewAssumeRoleProvider(STSClient(*cfg, o), ar.RoleARN, ar.options)
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
}

// options sets the AssumeRole call's parameters.
func (ar AssumeRole) options(o *stscreds.AssumeRoleOptions) {
	o.RoleSessionName = orDefaultName(ar.SessionName)
	if ar.ExternalID != "" {
		o.ExternalID = aws.String(ar.ExternalID)
	}
	if ar.Duration > 0 {
		o.Duration = ar.Duration
	}
	if ar.Policy != "" {
		o.Policy = aws.String(ar.Policy)
	}
	o.PolicyARNs = policyDescriptors(ar.PolicyARNs)
	if ar.SourceIdentity != "" {
		o.SourceIdentity = aws.String(ar.SourceIdentity)
	}
	for k, v := range ar.Tags {
		o.Tags = append(o.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	o.TransitiveTagKeys = ar.TransitiveTagKeys
}

func orDefaultName(name string) string {
	if name == "" {
		return DefaultSessionName
	}
	return name
}

func policyDescriptors(arns []string) []types.PolicyDescriptorType {
	var out []types.PolicyDescriptorType
	for _, a := range arns {
		out = append(out, types.PolicyDescriptorType{Arn: aws.String(a)})
	}
	return out
}

// staticToken is a web identity token given as a value.
type staticToken string

func (t staticToken) GetIdentityToken() ([]byte, error) { return []byte(t), nil }
