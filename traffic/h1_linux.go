package traffic

import (
	"net"
	"syscall"
)

// h1Supported: idleConnAlive can tell a closed idle connection here.
const h1Supported = true

// idleConnAlive peeks at an idle connection without blocking: an idle
// HTTP/1.1 connection has nothing to read, so EOF (the server closed it),
// unexpected bytes or an error mean it must not carry another request.
func idleConnAlive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true // never wait for readiness
	})
	return err == nil && alive
}
