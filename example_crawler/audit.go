package main

import (
	"fmt"
	"os"
	"sync/atomic"
)

// auditFile is the audit trail's file. It counts the events written: zerolog writes each event
// with one Write call.
type auditFile struct {
	f      *os.File
	events atomic.Int64
}

// createAudit creates (or truncates) the audit file at path.
func createAudit(path string) (*auditFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &auditFile{f: f}, nil
}

// Write writes one event.
func (a *auditFile) Write(p []byte) (int, error) {
	a.events.Add(1)
	return a.f.Write(p)
}

// Close closes the file.
func (a *auditFile) Close() error {
	return a.f.Close()
}
