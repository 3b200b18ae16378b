//go:build race

package main

// raceBuild says the tests run with the race detector; the binary the
// end-to-end tests build gets it too.
const raceBuild = true
