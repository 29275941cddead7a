// Command etcd is etcd's own server entry point, built from the Go module proxy at the version pinned
// in ../go.mod, because prebuilt release binaries cannot be downloaded here.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
