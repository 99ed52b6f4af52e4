package nodesim_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// helperEnv switches the test binary into the pod process it plays: pods in
// these tests run an image mapped to the test binary itself, with this
// variable in their env. That keeps the process under test a real separate
// program in its own namespaces, without building another binary.
const helperEnv = "NODESIM_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(podHelper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// podHelper serves, on the port in $PORT, a few read-only views of its
// container for the tests to check: its env, files, name resolution and
// hostname, plus /healthz. /write?path=&data= writes a file (PVC tests).
// On SIGTERM it logs "received SIGTERM" and exits 0.
func podHelper(args []string) int {
	fmt.Printf("helper started args=%q\n", args)
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		if _, err := os.Stat("/tmp/nodesim-helper-unhealthy-" + os.Getenv("POD_NAME")); err == nil {
			http.Error(rw, "unhealthy", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("/env", func(rw http.ResponseWriter, _ *http.Request) {
		env := os.Environ()
		sort.Strings(env)
		_ = json.NewEncoder(rw).Encode(env)
	})
	mux.HandleFunc("/args", func(rw http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(rw).Encode(args)
	})
	mux.HandleFunc("/file", func(rw http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = rw.Write(b)
	})
	mux.HandleFunc("/write", func(rw http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := os.WriteFile(p, []byte(r.URL.Query().Get("data")), 0o644); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("/resolve", func(rw http.ResponseWriter, r *http.Request) {
		addrs, err := net.LookupHost(r.URL.Query().Get("name"))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusNotFound)
			return
		}
		sort.Strings(addrs)
		fmt.Fprint(rw, strings.Join(addrs, ","))
	})
	// /whoami reads this pod through the API with in-cluster config, as the
	// member-agent does: service env, projected token and ca.crt.
	mux.HandleFunc("/whoami", func(rw http.ResponseWriter, r *http.Request) {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		pod, err := client.CoreV1().Pods(os.Getenv("POD_NAMESPACE")).Get(r.Context(), os.Getenv("POD_NAME"), metav1.GetOptions{})
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprint(rw, pod.UID)
	})
	mux.HandleFunc("/hostname", func(rw http.ResponseWriter, _ *http.Request) {
		h, _ := os.Hostname()
		fmt.Fprint(rw, h)
	})
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	fmt.Println("received SIGTERM")
	_ = srv.Close()
	return 0
}
