// The etcd server binary, built from the published go.etcd.io/etcd/server/v3 module: the same
// entry point as upstream's etcd command (etcdmain.Main), without its root module's replaces.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
