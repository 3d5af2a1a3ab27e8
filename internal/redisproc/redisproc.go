// Package redisproc holds what the programs and tests that start a private redis-server share: a
// PING over its unix socket, and the tail of its log for error messages.
package redisproc

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"time"
)

// Ping reports whether a server answers PING on the unix socket within a second.
func Ping(socket string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// LogTail returns the last 500 bytes of a log file, for an error message.
func LogTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}
