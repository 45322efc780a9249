// One server of the smuggling farm: Go's net/http. `gofarm PORT LOG` serves 127.0.0.1:PORT and
// appends one JSON line per request it parsed completely (head and whole body) to LOG:
// {"method", "target", "host", "body_len"}.
package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sync"
)

func main() {
	port, logPath := os.Args[1], os.Args[2]
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			line, _ := json.Marshal(map[string]any{
				"method": r.Method, "target": r.RequestURI, "host": r.Host, "body_len": len(body),
			})
			mu.Lock()
			log.Write(append(line, '\n'))
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok"))
	})
	server := &http.Server{Addr: "127.0.0.1:" + port, Handler: handler}
	if err := server.ListenAndServe(); err != nil {
		panic(err)
	}
}
