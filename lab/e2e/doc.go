// Package e2e holds end-to-end tests that drive the real terraform binary,
// with the provider installed from a filesystem mirror, in separate working
// directories at the same time, against the local S3 server; see
// e2e_test.go. It has no code of its own.
package e2e
