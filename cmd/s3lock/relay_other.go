//go:build !linux

package main

// relayArg is the hidden first argument of the relay; without a
// parent-death signal (Linux only) there is none.
const relayArg = "__relay"

func relayed(bool) bool { return false }

func relayCommand(argv []string) ([]string, string, error) { return argv, "", nil }

func runRelay([]string) int { return exitUsage }
