//go:build race

package cli

// The binary under test is built with -race too, when the tests are.
func init() { raceBuild = true }
