//go:build !linux

package main

import "syscall"

// limiterProcAttr: the limiters are Debian packages; elsewhere they start with the default attributes.
func limiterProcAttr() *syscall.SysProcAttr { return nil }
