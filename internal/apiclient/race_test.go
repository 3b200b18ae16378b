//go:build race

package apiclient_test

// raceBuild says the tests run with the race detector; the taskd they build
// gets it too.
const raceBuild = true
