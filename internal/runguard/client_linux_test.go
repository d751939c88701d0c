package runguard

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func init() { helpers[impostorArg] = helperImpostor }

// impostorArg makes this test binary a guard's impostor of another user: it
// listens on the bound socket it inherits as file 3, after switching to the
// user nobody (impostorUID), accepts one connection and prints how many bytes
// it received on it.
const impostorArg = "__s3lock_test_impostor"

// impostorUID is the user the impostor listens as: nobody.
const impostorUID = 65534

// A provider sends nothing to a guard that is not of its own user: it once
// handed whatever served the run's socket its requests (the run's lease
// tokens, the AWS credentials, the SSE-C key) without asking who that was.
func TestClient_RefusesAGuardOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("listening as another user needs root")
	}
	run := Run{PID: os.Getpid(), Start: 1, Boot: "impostor", NS: t.Name()}
	sock, err := run.socket()
	if err != nil {
		t.Fatal(err)
	}
	// Bound here, in the user's own directory, and listened on by a process
	// of another user: the listener's user is the one a client sees.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	bound := os.NewFile(uintptr(fd), sock)
	defer bound.Close()
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(sock) })
	impostor := exec.Command(os.Args[0], impostorArg)
	impostor.ExtraFiles = []*os.File{bound}
	out, err := impostor.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	impostor.Stderr = os.Stderr
	if err := impostor.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = impostor.Process.Kill(); _ = impostor.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "listening" {
		t.Fatalf("the impostor said %q (%v); want it listening", lines.Text(), lines.Err())
	}

	c := NewClient(run)
	_, err = c.Claim(t.Context(), ClientConfig{Holder: "provider"}, "bucket", "lock")
	if want := fmt.Sprintf("%s is served by a process of user %d", sock, impostorUID); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Claim through a guard of user %d = %v; want it refused: %s", impostorUID, err, want)
	}
	if !lines.Scan() || lines.Text() != "received 0 bytes" {
		t.Fatalf("the impostor said %q (%v); want it to have received nothing", lines.Text(), lines.Err())
	}
}

// helperImpostor is impostorArg's body.
func helperImpostor() int {
	const bound = 3
	if err := syscall.Setgid(impostorUID); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := syscall.Setuid(impostorUID); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := syscall.Listen(bound, 1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	conn, _, err := syscall.Accept(bound)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	received := 0
	buf := make([]byte, 4096)
	for {
		n, err := syscall.Read(conn, buf)
		if n <= 0 || err != nil {
			break
		}
		received += n
	}
	fmt.Printf("received %d bytes\n", received)
	return 0
}
