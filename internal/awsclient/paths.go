package awsclient

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The files named in Options, and the environment behind them.
//
// The provider hands its options to the run guard, a process of its own
// that runs in another directory (next to its socket) and is started by the
// first provider process of a Terraform run. A relative path, a "~", or a
// setting taken from the environment would then mean something else there,
// or nothing. Resolved pins all of them down in the options themselves, and
// AbsoluteEnviron does the same for the variables that the AWS SDK reads on
// its own.

// Environment variables that name files, which the AWS SDK (or Resolved)
// reads relative to the current directory.
const (
	envConfigFile      = "AWS_CONFIG_FILE"
	envCredentialsFile = "AWS_SHARED_CREDENTIALS_FILE"
)

// pathVariables are the environment variables that name a file.
var pathVariables = []string{envCABundle, EnvWebIdentityTokenFile, envConfigFile, envCredentialsFile}

// Resolved returns o with every file it names as an absolute path (a leading
// "~" is the home directory, a relative path is relative to the current
// directory), and with what the S3 backend takes from the environment for
// the settings that are not set: CustomCABundle from AWS_CA_BUNDLE (unless
// Insecure), and for AssumeRoleWithWebIdentity the role, token file and
// session name from AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and
// AWS_ROLE_SESSION_NAME. The result means the same in any process and
// directory, such as the provider's run guard. Resolving twice changes
// nothing; LoadConfig and New resolve the options they are given.
//
// The error wraps ErrInvalidOptions: a path starts with "~" and the home
// directory is unknown, or the current directory cannot be read.
func (o Options) Resolved() (Options, error) {
	var err error
	if o.CustomCABundle == "" && !o.Insecure {
		if v := os.Getenv(envCABundle); v != "" {
			o.CustomCABundle, o.caBundleFromEnv = v, true
		}
	}
	if o.CustomCABundle != "" {
		what := "custom CA bundle"
		if o.caBundleFromEnv {
			what = envCABundle
		}
		if o.CustomCABundle, err = absPath(what, o.CustomCABundle); err != nil {
			return Options{}, err
		}
	}
	if o.SharedConfigFiles, err = absPaths("shared config file", o.SharedConfigFiles); err != nil {
		return Options{}, err
	}
	if o.SharedCredentialsFiles, err = absPaths("shared credentials file", o.SharedCredentialsFiles); err != nil {
		return Options{}, err
	}
	if w := o.AssumeRoleWithWebIdentity; w != nil {
		resolved := w.withEnvironment()
		if resolved.WebIdentityTokenFile != "" {
			if resolved.WebIdentityTokenFile, err = absPath("web identity token file", resolved.WebIdentityTokenFile); err != nil {
				return Options{}, err
			}
		}
		o.AssumeRoleWithWebIdentity = &resolved
	}
	return o, nil
}

// AbsoluteEnviron returns environ (KEY=value entries, as os.Environ gives
// them) with the relative paths of the AWS variables that name files
// (AWS_CA_BUNDLE, AWS_WEB_IDENTITY_TOKEN_FILE, AWS_CONFIG_FILE,
// AWS_SHARED_CREDENTIALS_FILE) made absolute against the current directory,
// for a process that is started in another one and reads them itself. An
// entry that cannot be made absolute is kept as it is.
func AbsoluteEnviron(environ []string) []string {
	out := make([]string, len(environ))
	for i, kv := range environ {
		out[i] = kv
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" || filepath.IsAbs(v) || strings.HasPrefix(v, "~") {
			continue
		}
		for _, name := range pathVariables {
			if k != name {
				continue
			}
			if abs, err := filepath.Abs(v); err == nil {
				out[i] = k + "=" + abs
			}
		}
	}
	return out
}

// absPath makes a file named by setting what absolute.
func absPath(what, name string) (string, error) {
	p := name
	if p == "~" || strings.HasPrefix(p, "~/") || (filepath.Separator == '\\' && strings.HasPrefix(p, `~\`)) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%w: %s %q starts with ~ but the home directory is unknown: give an absolute path (%w)",
				ErrInvalidOptions, what, name, err)
		}
		p = filepath.Join(home, p[1:])
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s %q cannot be made absolute: %w", ErrInvalidOptions, what, name, err)
	}
	return abs, nil
}

// absPaths is absPath of each name, in a new slice (nil stays nil).
func absPaths(what string, names []string) ([]string, error) {
	if names == nil {
		return nil, nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		if n == "" {
			continue // validateFiles names it
		}
		abs, err := absPath(what, n)
		if err != nil {
			return nil, err
		}
		out[i] = abs
	}
	return out, nil
}

// readable checks that a file named in the options can be read, and says
// which setting named it otherwise.
func readable(what, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("%s %q cannot be read: %w", what, name, unwrapPathError(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return fmt.Errorf("%s %q is a directory, not a file", what, name)
	}
	return nil
}

// unwrapPathError drops the path of an *os.PathError (the message names the
// file already).
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
