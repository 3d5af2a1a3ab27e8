package ext

// Exported for the tests of package ext_test (the store conformance tests import internal/storetest,
// which imports this package).
var NewMemoryStoreForTest = newMemoryStore
