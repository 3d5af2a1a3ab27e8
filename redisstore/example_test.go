package redisstore_test

import (
	"log"

	"github.com/collypace/ext"
	"github.com/collypace/ext/redisstore"
	"github.com/gocolly/colly/v2"
)

// Every crawler process of a fleet opens the same Redis: together they pace each host as one would.
// (No output: the example needs a running server.)
func ExampleOpen() {
	st, err := redisstore.Open("127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	c := colly.NewCollector()
	pacer := ext.AdaptivePacing(c, ext.WithStore(st))
	defer pacer.Close() // writes what is pending, before the store closes
	if err := c.Visit("https://example.com/"); err != nil {
		log.Print(err)
	}
	c.Wait()
}
