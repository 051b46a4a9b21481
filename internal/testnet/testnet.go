// Package testnet gives tests loopback addresses for the servers they
// start as child processes.
package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// FreeAddr returns a loopback address nothing listens on, for a child
// process to listen on. A port of the kernel's ephemeral range
// (32768–60999 by default) that was free when looked at may be taken as
// the source port of any outgoing connection of the tests running
// alongside before the child binds it; ports below that range are taken
// only by explicit binds, so the address is picked there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatal("testnet: no free loopback port between 20000 and 32000")
	return ""
}
