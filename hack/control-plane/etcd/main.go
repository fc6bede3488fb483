// Command etcd is upstream etcd's server: the same entry point as etcd's own main package, which lives in a module
// whose replace directives keep it from being built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
