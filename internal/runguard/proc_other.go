//go:build !linux && !darwin

package runguard

import (
	"fmt"
	"net"
	"runtime"
)

// On other systems (Windows, the BSDs) the guard cannot follow the terraform
// process: every ephemeral lease that asks for a whole run fails with
// ErrUnsupported (see the provider's diagnostics for the ways out).

func unsupported() error { return fmt.Errorf("%w (this is %s)", ErrUnsupported, runtime.GOOS) }

func procOf(int) (proc, error)               { return proc{}, unsupported() }
func descendants(int) []proc                 { return nil }
func processes() ([]proc, error)             { return nil, unsupported() }
func clockNow() uint64                       { return 0 }
func startedByPlugin(int) bool               { return false }
func bootID() (string, error)                { return "", unsupported() }
func pidNamespace() (string, error)          { return "", unsupported() }
func peerOf(*net.UnixConn) (int, int, error) { return 0, 0, unsupported() }
func tellProcess(int, string) error          { return unsupported() }
