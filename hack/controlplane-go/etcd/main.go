// Command etcd is the etcd server, built from the published Go module so that
// tests do not need a release tarball from GitHub.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
