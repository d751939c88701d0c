// Package shapetest holds the tests that keep the shipped code readable in
// one sitting: no function body over 60 lines and none with more than six
// parameters in the SDK, the provider, the run guard and the CLI
// (functions_test.go; issue 37). It has no code of its own.
package shapetest
