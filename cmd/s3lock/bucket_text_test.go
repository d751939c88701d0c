package main

import (
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Text read from the bucket in every output (issue 35): an epoch object whose
// holder was `evil\e]0;…\a\e[31m…\n::warning::…` made `s3lock acquire`
// print the escapes and a line that GitHub Actions runs as a workflow
// command, and `status` set the terminal's title and forged a table row.
// Anyone who may put objects under one lock's keys could do it.

// hostileHolder is the holder and waiter name written into the bucket
// (s3test.HostileTextJSON).
const hostileHolder = s3test.HostileTextJSON

// putHostile writes, under the lock name, a held lease whose holder is
// hostileHolder and a ticket in its line whose waiter is too.
func (c *cli) putHostile(name string) {
	c.t.Helper()
	for key, body := range map[string]string{
		s3lock.Token{Name: name, Epoch: 1}.Key(): `{"leaderId":` + hostileHolder + `,"validityMs":600000,"expired":false,"s3lock":1,"epoch":1,"nonce":"n1"}`,
		name + "/lock-line/0000000001-fifo-0123456789abcdef.json": `{"leaderId":` + hostileHolder +
			`,"validityMs":600000,"s3lock":1,"line":true,"order":"fifo","nonce":"n2","write":"w2"}`,
	} {
		if _, err := c.ns.Client.PutObject(c.t.Context(), &s3.PutObjectInput{Bucket: aws.String(c.ns.Bucket), Key: aws.String(key),
			Body: strings.NewReader(body)}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// safeOutput fails the test if out holds a character that is not graphic
// (other than the line breaks and tabs s3lock writes itself), or a line that
// starts with "::" (a GitHub Actions workflow command), or if the holder's
// text is not shown at all (it is shown escaped, not dropped).
func safeOutput(t *testing.T, what, out string) {
	t.Helper()
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(strings.TrimSpace(line), "::") {
			t.Errorf("%s printed a line that a CI runner runs as a command: %q", what, line)
		}
		if i := strings.IndexFunc(line, func(r rune) bool { return r != '\t' && !unicode.IsGraphic(r) }); i >= 0 {
			t.Errorf("%s printed %q, which is not printable, in %q", what, line[i:i+1], line)
		}
	}
	if !strings.Contains(out, `x1b]0;pwned`) {
		t.Errorf("%s does not show the holder escaped:\n%s", what, out)
	}
}

func TestBucketText_HostileHolderIsShownEscapedInEveryOutput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	name := c.name("hostile")
	c.putHostile(name)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"acquire", "--wait", "0", name}, exitHeld},
		{[]string{"acquire", "--wait", "2s", name}, exitHeld},
		{[]string{"acquire", "--wait", "2s", "--order", "fifo", name}, exitHeld},
		{[]string{"run", "--wait", "2s", name, "--", "true"}, exitHeld},
		{[]string{"status", name}, exitOK},
		{[]string{"status", "--prefix", c.name("")}, exitOK},
		{[]string{"watch", "--output", "text", "--until", "held", name}, exitOK},
	} {
		r := c.run(tc.args...)
		if r.code != tc.code {
			t.Errorf("s3lock %q: %s; want exit %d", tc.args, r, tc.code)
			continue
		}
		safeOutput(t, fmt.Sprintf("s3lock %q (stdout and stderr)", tc.args), r.stdout+r.stderr)
	}
}
