//go:build !linux && !darwin

package procfacts

import (
	"fmt"
	"net"
	"os"
	"runtime"
)

// On other systems (Windows, the BSDs) no process fact is read: each is an
// *UnsupportedError with System set.

func unsupportedSystem() error {
	return &UnsupportedError{Err: fmt.Errorf("this is %s", runtime.GOOS), System: true}
}

func Of(int) (Process, error)                      { return Process{}, unsupportedSystem() }
func descendants(int) []Process                    { return nil }
func All() ([]Process, error)                      { return nil, unsupportedSystem() }
func Now() uint64                                  { return 0 }
func HasEnv(int, string) bool                      { return false }
func BootID() (string, error)                      { return "", unsupportedSystem() }
func PIDNamespace() (string, error)                { return "", unsupportedSystem() }
func Peer(*net.UnixConn) (pid, uid int, err error) { return 0, 0, unsupportedSystem() }
func Stderr(int) (*os.File, error)                 { return nil, unsupportedSystem() }
func OpenFDs() ([]int, error)                      { return nil, unsupportedSystem() }
