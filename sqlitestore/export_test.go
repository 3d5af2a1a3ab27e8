package sqlitestore

// Exported for the tests of package sqlitestore_test.
var CreateV1 = createV1
