//go:build race

package main

// raceEnabled makes the binary test build with the same flags as the test,
// so the build cache the test run already filled is reused.
const raceEnabled = true
