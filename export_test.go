package ext

// Exported for the tests of package ext_test (the store conformance tests import internal/storetest,
// which imports this package).
var NewMemoryStoreForTest = newMemoryStore

// NewSharedMemoryStoreForTest returns one view of an in-memory SharedStore (the virtual-time grid's
// fleet store), for the SharedStore conformance tests.
func NewSharedMemoryStoreForTest() SharedStore { return newSimShared().view(1) }

// SessionStoreForTest is the interface of a store that keeps a record of its pacers (sessionStore),
// for the check that sqlitestore implements it.
type SessionStoreForTest = sessionStore
