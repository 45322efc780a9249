// Command probe is the one program of the real-cluster node's test image
// (localhost/fleetgate-node-probe): static, no shell, no libc. build.sh --node packs it as an
// OCI archive whose entrypoint is /probe and whose default argument is "pause", so the image
// serves as the pod sandbox's pause container too.
//
//	probe pause              wait for SIGTERM or SIGINT, then exit 0
//	probe serve ADDR         HTTP on ADDR: /healthz answers 200 "ok"
//	probe dial ADDR TEXT     connect to ADDR every second and write TEXT and a newline;
//	                         each outcome is logged
//	probe apiserver          GET /version from the API server through the in-cluster
//	                         Service (KUBERNETES_SERVICE_HOST/PORT), verifying it with the
//	                         ServiceAccount's CA, every second; each outcome is logged
//
// Every mode runs until it is signalled; what it sees goes to stdout (the container's log).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"pause"}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	switch {
	case args[0] == "pause":
	case args[0] == "serve" && len(args) == 2:
		go serve(args[1])
	case args[0] == "dial" && len(args) == 3:
		go every(func() error { return dial(args[1], args[2]) })
	case args[0] == "apiserver":
		go every(apiserver)
	default:
		fmt.Fprintf(os.Stderr, "usage: probe pause | serve ADDR | dial ADDR TEXT | apiserver (got %q)\n", args)
		os.Exit(64)
	}
	<-stop
}

func serve(addr string) {
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("probe: %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		io.WriteString(w, "ok\n")
	})
	fmt.Printf("probe: serving on %s\n", addr)
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Printf("probe: serve: %v\n", err)
		os.Exit(1)
	}
}

func every(f func() error) {
	for {
		if err := f(); err != nil {
			fmt.Printf("probe: error: %v\n", err)
		}
		time.Sleep(time.Second)
	}
}

func dial(addr, text string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, text+"\n"); err != nil {
		return err
	}
	fmt.Printf("probe: dialed %s from %s\n", addr, conn.LocalAddr())
	return nil
}

func apiserver() error {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT are not set")
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	url := "https://" + net.JoinHostPort(host, port) + "/version"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Printf("probe: GET %s: %d %s\n", url, resp.StatusCode, compact(body))
	return nil
}

func compact(b []byte) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c != '\n' && c != ' ' {
			out = append(out, c)
		}
	}
	return string(out)
}
