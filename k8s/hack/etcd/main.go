// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3/etcdmain)
// built from the Go module proxy, so the envtest tests of the k8s module
// run a real etcd without a downloaded binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
