package scenario_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// A host with a hidden capacity of one request at a time: the second request at once is refused,
// and the server's own log shows it.
func ExampleStart() {
	h, err := scenario.Start(scenario.HostConfig{Pages: 3, Capacity: &scenario.Capacity{Rate: 0.5, Burst: 1, RetryAfter: 2 * time.Second}})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, p := range []string{"/", "/p/1"} {
		resp, err := client.Get(h.URL() + p)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%s %d Retry-After=%q\n", p, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	a := h.Arrivals()
	fmt.Println("pages OK:", scenario.PagesOK(a), "refused:", scenario.Refused(a), "windows:", len(h.Windows()))
	// Output:
	// / 200 Retry-After=""
	// /p/1 429 Retry-After="2"
	// pages OK: 1 refused: 1 windows: 1
}
