// Command arbor browses and edits an Arbor tree; see package cli.
package main

import (
	"os"

	"github.com/arbor-coord/arbor/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
