// Package docstest holds the tests that keep the repository's prose true to
// its code: every Go snippet of its Markdown compiles against the current
// SDK (snippets_test.go). It has no code of its own.
package docstest
