package ext_test

import (
	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
)

// sqlitestore keeps the record of its pacers that a restart after a crash needs (issue 33): the pacer
// finds it by these methods, which nothing else names.
var _ ext.SessionStoreForTest = (*sqlitestore.Store)(nil)
