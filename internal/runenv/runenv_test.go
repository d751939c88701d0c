package runenv_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
)

// getenv serves entries as Environ writes them (NAME=VALUE), as a child
// process's os.Getenv would.
func getenv(entries []string) func(string) string {
	m := map[string]string{}
	for _, e := range entries {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

func TestLease_WhatRunWritesItsCommandReadsBack(t *testing.T) {
	for _, l := range []runenv.Lease{
		{Bucket: "locks", Name: "deploy/prod", Key: "deploy/prod/00000000000000000042", Holder: "ci@runner:7 a1b2", Epoch: 42, Slot: 0, Slots: 1},
		{Bucket: "locks", Name: "ci/gpu", Key: "ci/gpu.slots/2/00000000000000000007", Holder: "h", Epoch: 7, Slot: 2, Slots: 3},
	} {
		got, err := runenv.Read(getenv(l.Environ()))
		if err != nil || got != l {
			t.Errorf("Read(Environ(%+v)) = %+v, %v; want the lease back", l, got, err)
		}
	}
}

func TestLease_EveryVariableIsWritten(t *testing.T) {
	env := runenv.Lease{Bucket: "b", Name: "n", Key: "k", Holder: "h", Epoch: 1, Slots: 1}.Environ()
	for _, name := range []string{runenv.Epoch, runenv.Key, runenv.Holder, runenv.Bucket, runenv.Name, runenv.Slot, runenv.Slots} {
		if getenv(env)(name) == "" {
			t.Errorf("Environ() = %q: no %s", env, name)
		}
	}
}

func TestRead_ALeaseFromACLIBeforeSlotsIsAMutex(t *testing.T) {
	env := []string{"S3LOCK_EPOCH=5", "S3LOCK_KEY=k", "S3LOCK_BUCKET=b", "S3LOCK_NAME=n", "S3LOCK_HOLDER=h"}
	got, err := runenv.Read(getenv(env))
	if err != nil || got.Slot != 0 || got.Slots != 1 || got.Epoch != 5 {
		t.Fatalf("Read(%q) = %+v, %v; want a mutex's lease at epoch 5", env, got, err)
	}
}

func TestRead_ABrokenEnvironmentIsAnErrorNamingTheVariable(t *testing.T) {
	good := runenv.Lease{Bucket: "b", Name: "n", Key: "k", Holder: "h", Epoch: 3, Slot: 1, Slots: 2}.Environ()
	for _, tc := range []struct {
		set, want string
	}{
		{"S3LOCK_EPOCH=", "S3LOCK_EPOCH is not set"},
		{"S3LOCK_KEY=", "S3LOCK_KEY is not set"},
		{"S3LOCK_BUCKET=", "S3LOCK_BUCKET is not set"},
		{"S3LOCK_NAME=", "S3LOCK_NAME is not set"},
		{"S3LOCK_EPOCH=-1", `S3LOCK_EPOCH="-1" is not an epoch`},
		{"S3LOCK_SLOT=x", `S3LOCK_SLOT="x" is not a slot number`},
		{"S3LOCK_SLOTS=many", `S3LOCK_SLOTS="many" is not a number of slots`},
		{"S3LOCK_SLOT=3", "S3LOCK_SLOT=3 and S3LOCK_SLOTS=2: a slot is 1 to S3LOCK_SLOTS"},
		{"S3LOCK_SLOT=0", "S3LOCK_SLOT=0 and S3LOCK_SLOTS=2"},
		{"S3LOCK_SLOTS=", "sets both or neither"},
	} {
		_, err := runenv.Read(getenv(append(append([]string{}, good...), tc.set)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("with %s: Read() error = %v; want one saying %q", tc.set, err, tc.want)
		}
	}
}

func TestPresent_TellsNoLeaseFromABrokenOne(t *testing.T) {
	if runenv.Present(getenv(nil)) {
		t.Error("Present() with no S3LOCK_EPOCH = true")
	}
	if !runenv.Present(getenv([]string{"S3LOCK_EPOCH=x"})) {
		t.Error("Present() with S3LOCK_EPOCH=x = false: a broken lease would be taken for none")
	}
	if runenv.Present(getenv([]string{"S3LOCK_BUCKET=locks", "S3LOCK_NAME=deploy"})) {
		t.Error("Present() with S3LOCK_BUCKET (also the CLI's default bucket) but no S3LOCK_EPOCH = true")
	}
}

func TestHelp_NamesEveryVariableWithinEightyColumns(t *testing.T) {
	help := runenv.Help()
	for _, name := range []string{runenv.Epoch, runenv.Key, runenv.Holder, runenv.Bucket, runenv.Name, runenv.Slot, runenv.Slots} {
		if !strings.Contains(help, "  "+name+" ") {
			t.Errorf("Help() does not describe %s:\n%s", name, help)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if len(line) > 80 {
			t.Errorf("Help() line longer than 80 columns: %q", line)
		}
	}
}

// TestNames_AreSpelledOnlyHere walks the repository's Go code (tests
// aside) for string literals that spell a variable of the contract: each
// must use the constants instead, so that the CLI that writes the
// environment and every reader agree by construction. S3LOCK_BUCKET and
// S3LOCK_HOLDER are left out: they are also the CLI's own settings (so a
// command's own s3lock calls use the run's bucket), spelled where the CLI
// reads its settings.
func TestNames_AreSpelledOnlyHere(t *testing.T) {
	spelled := regexp.MustCompile(`S3LOCK_(EPOCH|KEY|NAME|SLOT|SLOTS|TOKEN)\b`)
	root, home := filepath.Join("..", ".."), filepath.Join("..", "..", "internal", "runenv", "runenv.go")
	var where []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == home:
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && spelled.MatchString(lit.Value) {
				where = append(where, fmt.Sprintf("%s: %s", path, spelled.FindString(lit.Value)))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(where) > 0 {
		t.Errorf("the environment of `s3lock run` is spelled outside internal/runenv (use its constants):\n%s", strings.Join(where, "\n"))
	}
}

// TestLease_CommandWithholdsTheSecrets: `s3lock run` passed its whole
// environment on to its command, the SSE-C key and a lease token with it;
// Command leaves them out (in any letter case) and keeps the rest, the
// lease's variables last (a stale lease's, inherited, replaced).
func TestLease_CommandWithholdsTheSecrets(t *testing.T) {
	l := runenv.Lease{Bucket: "b", Name: "n", Key: "k", Holder: "h", Epoch: 2, Slots: 1}
	parent := []string{"PATH=/bin", runenv.SSECustomerKey + "=c2VjcmV0", runenv.Token + `={"nonce":"x"}`,
		"s3lock_token=lower", "AWS_REGION=eu-west-1", runenv.Epoch + "=1"}
	env := l.Command(parent)
	get := getenv(env)
	for _, name := range []string{runenv.SSECustomerKey, runenv.Token} {
		if get(name) != "" {
			t.Errorf("Command() = %q: %s passed on", env, name)
		}
	}
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "s3lock_token=") }) {
		t.Errorf("Command() = %q: s3lock_token passed on (Windows reads it as %s)", env, runenv.Token)
	}
	if get("PATH") != "/bin" || get("AWS_REGION") != "eu-west-1" || get(runenv.Epoch) != "2" {
		t.Errorf("Command() = %q; want PATH, AWS_REGION kept and the lease's epoch 2", env)
	}
	if want := []string{runenv.SSECustomerKey, runenv.Token}; !slices.Equal(runenv.Withheld(), want) {
		t.Errorf("Withheld() = %q; want %q", runenv.Withheld(), want)
	}
}

// A set's environment names each lock: Member shows a reader of one lease
// its own lock's, a run of one lock inside a set's run drops the outer set's
// variables, and a set's variables that disagree with the single-lock ones
// (not written by one run) are not read as a set.
func TestSetEnviron_EachMemberReadsItsOwnLease(t *testing.T) {
	a := runenv.Lease{Bucket: "b", Name: "a", Key: "a/lock-0000000005.json", Holder: "h", Epoch: 5, Slots: 1}
	z := runenv.Lease{Bucket: "b", Name: "z", Key: "z/lock-0000000002.json", Holder: "h", Epoch: 2, Slots: 1}
	env := runenv.SetEnviron([]string{"PATH=/bin", runenv.Token + "=secret"}, []runenv.Lease{a, z})
	get := getenv(env)
	if get(runenv.Locks) != "2" || get(runenv.Token) != "" || get("PATH") != "/bin" {
		t.Errorf("SetEnviron = %q; want S3LOCK_LOCKS=2, PATH kept, the token withheld", env)
	}
	for _, want := range []runenv.Lease{a, z} {
		if got, err := runenv.Read(runenv.Member(get, want.Name)); err != nil || got != want {
			t.Errorf("Read(Member(%s)) = %+v, %v; want %+v", want.Name, got, err, want)
		}
	}
	if got, _ := runenv.Read(runenv.Member(get, "other")); got != a {
		t.Errorf("Read(Member(other)) = %+v; want the single-lock variables, the first lock's", got)
	}
	inner := runenv.Lease{Bucket: "b", Name: "inner", Key: "inner/lock-0000000001.json", Holder: "h", Epoch: 1, Slots: 1}.Command(env)
	ig := getenv(inner)
	if ig(runenv.Locks) != "" || ig(runenv.Name+"_2") != "" {
		t.Errorf("a run inside the set's run passes the outer set on: %q", inner)
	}
	stale := append(slices.Clone(env), runenv.Name+"=inner", runenv.Epoch+"=1", runenv.Key+"=inner/lock-0000000001.json")
	if got, _ := runenv.Read(runenv.Member(getenv(stale), "z")); got.Name != "inner" {
		t.Errorf("a set whose first lock is not the single lease's was read as a set: %+v", got)
	}
}
