package main

import "syscall"

// limiterProcAttr starts a limiter in its own process group, so that a Ctrl-C at the terminal reaches
// pacebench alone (which then stops the limiter), and has the kernel kill it if pacebench dies without
// stopping it.
func limiterProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
