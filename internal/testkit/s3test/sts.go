package s3test

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// STS is a minimal local STS endpoint, for tests of assumed roles: no real
// STS runs offline, and versitygw has none. It implements the query API's
// AssumeRoleWithWebIdentity, AssumeRole and GetCallerIdentity, checks what a
// real STS would refuse in a test (an unknown role, a wrong token), and
// hands out the credentials it was given, those of the test store, so that
// the store accepts what the client then signs with them. It hands out no
// session token: versitygw refuses requests that carry one it did not issue.
type STS struct {
	// URL is the endpoint to configure as the STS endpoint.
	URL string

	cfg   STSConfig
	mu    sync.Mutex
	calls []STSCall
}

// STSConfig says what the STS accepts and hands out.
type STSConfig struct {
	// Roles are the role ARNs that may be assumed; any other is refused
	// with AccessDenied.
	Roles []string
	// WebIdentityToken is the one token AssumeRoleWithWebIdentity accepts
	// (others get InvalidIdentityToken).
	WebIdentityToken string
	// AccessKey and SecretKey are the credentials every role hands out.
	AccessKey, SecretKey string
}

// STSCall is one request the STS answered.
type STSCall struct {
	Action string
	// Form holds the request's parameters (RoleArn, RoleSessionName,
	// DurationSeconds, Policy, PolicyArns.member.1.arn, Tags.member.1.Key, ...).
	Form url.Values
	// AccessKey is the access key the request was signed with ("" for an
	// unsigned one, as AssumeRoleWithWebIdentity is).
	AccessKey string
	// Status is the HTTP status of the answer.
	Status int
}

// NewSTS starts an STS for the rest of the test.
func NewSTS(tb testing.TB, cfg STSConfig) *STS {
	tb.Helper()
	s := &STS{cfg: cfg}
	srv := httptest.NewServer(s)
	tb.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Calls returns the requests for action answered so far ("" for all).
func (s *STS) Calls(action string) []STSCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []STSCall
	for _, c := range s.calls {
		if action == "" || c.Action == action {
			out = append(out, c)
		}
	}
	return out
}

// credentialPattern finds the access key in a SigV4 Authorization header.
var credentialPattern = regexp.MustCompile(`Credential=([^/,\s]+)/`)

func (s *STS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	call := STSCall{Action: r.Form.Get("Action"), Form: r.PostForm}
	if m := credentialPattern.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		call.AccessKey = m[1]
	}
	call.Status = s.answer(w, call)
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
}

// answer writes the response to call and returns its status.
func (s *STS) answer(w http.ResponseWriter, call STSCall) int {
	role := call.Form.Get("RoleArn")
	switch call.Action {
	case "AssumeRoleWithWebIdentity":
		if token := call.Form.Get("WebIdentityToken"); token != s.cfg.WebIdentityToken {
			return stsError(w, http.StatusBadRequest, "InvalidIdentityToken", "the web identity token is not valid")
		}
	case "AssumeRole":
		if call.AccessKey == "" {
			return stsError(w, http.StatusForbidden, "MissingAuthenticationToken", "AssumeRole must be signed")
		}
	case "GetCallerIdentity":
		return stsResult(w, call.Action, fmt.Sprintf(
			"<Arn>arn:aws:sts::123456789012:assumed-role/s3test/%s</Arn><UserId>%s</UserId><Account>123456789012</Account>",
			xmlText(call.AccessKey), xmlText(call.AccessKey)))
	default:
		return stsError(w, http.StatusBadRequest, "InvalidAction", "the s3test STS does not implement "+call.Action)
	}
	if !slices.Contains(s.cfg.Roles, role) {
		return stsError(w, http.StatusForbidden, "AccessDenied", "not authorized to assume "+role)
	}
	session := call.Form.Get("RoleSessionName")
	assumed := strings.Replace(strings.Replace(role, ":iam:", ":sts:", 1), ":role/", ":assumed-role/", 1) + "/" + session
	return stsResult(w, call.Action, fmt.Sprintf(`<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey>`+
		`<Expiration>%s</Expiration></Credentials>`+
		`<AssumedRoleUser><Arn>%s</Arn><AssumedRoleId>AROAS3TEST:%s</AssumedRoleId></AssumedRoleUser>`,
		xmlText(s.cfg.AccessKey), xmlText(s.cfg.SecretKey), time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		xmlText(assumed), xmlText(session)))
}

// stsResult writes a successful answer in the shape of STS's query API.
func stsResult(w http.ResponseWriter, action, inner string) int {
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<%[1]sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><%[1]sResult>%[2]s</%[1]sResult>`+
		`<ResponseMetadata><RequestId>s3test</RequestId></ResponseMetadata></%[1]sResponse>`, action, inner)
	return http.StatusOK
}

// stsError writes an STS error answer.
func stsError(w http.ResponseWriter, status int, code, msg string) int {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>`+
		`<Code>%s</Code><Message>%s</Message></Error><RequestId>s3test</RequestId></ErrorResponse>`, code, xmlText(msg))
	return status
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
