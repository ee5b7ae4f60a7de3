// Command fencedstore is a small storage service that refuses the writes
// of lock holders whose fencing token is older than the highest it has
// seen for their lock, using package fence.
//
//	go run ./examples/fencedstore -dir /tmp/blobs -listen 127.0.0.1:8480
//
// A blob lives under the lock that guards it, at /blobs/LOCK/KEY. A write
// carries the writer's fencing token (recipes.Mutex.Token in Go,
// fencing_token in the HTTP lock API's acquire answer) in
// X-Fencing-Token:
//
//	curl -X PUT -H 'X-Fencing-Token: 7' --data-binary @march.pdf localhost:8480/blobs/invoices/march
//	curl -i localhost:8480/blobs/invoices/march
//
// A write answers 204 when the blob is stored, 409 when a newer holder of
// the lock has written (the holder lost its lock), 400 for a missing or bad
// token or name, 413 for a blob over 16 MiB. A read answers the blob, with
// the token it was written with in X-Fencing-Token, or 404. Errors are
// {"error": "..."}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/arbor-coord/arbor/fence"
)

// maxBlob is the largest blob a write may store.
const maxBlob = 16 << 20

func main() {
	dir := flag.String("dir", "", "the directory to keep the blobs in (required)")
	listen := flag.String("listen", "127.0.0.1:8480", "the address to serve HTTP on")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "fencedstore: -dir is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *listen); err != nil {
		log.Fatalf("fencedstore: %v", err)
	}
}

// run serves the blobs in dir on listen until ctx ends.
func run(ctx context.Context, dir, listen string) error {
	d, err := fence.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Printf("fencedstore: serving %s on http://%s\n", dir, ln.Addr())
	return serve(ctx, d, ln)
}

// serve serves the blobs of d on ln until ctx ends, then shuts down,
// letting the requests under way finish.
func serve(ctx context.Context, d *fence.Dir, ln net.Listener) error {
	srv := &http.Server{Handler: newHandler(d), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

func newHandler(d *fence.Dir) http.Handler {
	s := &store{d: d}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /blobs/{lock}/{key}", s.put)
	mux.HandleFunc("GET /blobs/{lock}/{key}", s.get)
	return mux
}

// store serves the blobs of one fence.Dir.
type store struct {
	d *fence.Dir
}

func (s *store) put(w http.ResponseWriter, r *http.Request) {
	header := r.Header.Get("X-Fencing-Token")
	if header == "" {
		writeError(w, http.StatusBadRequest, errors.New("X-Fencing-Token is missing: a write needs the writer's fencing token"))
		return
	}
	token, err := strconv.ParseInt(header, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("X-Fencing-Token %q is not a number", header))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBlob))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if err := s.d.Write(r.PathValue("lock"), token, r.PathValue("key"), data); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *store) get(w http.ResponseWriter, r *http.Request) {
	data, token, err := s.d.Read(r.PathValue("lock"), r.PathValue("key"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Fencing-Token", strconv.FormatInt(token, 10))
	w.Write(data)
}

// statusOf returns the HTTP status that answers err.
func statusOf(err error) int {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, fence.ErrStaleToken):
		return http.StatusConflict
	case errors.Is(err, fence.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge
	default:
		log.Printf("fencedstore: %v", err)
		return http.StatusInternalServerError
	}
}

// writeError answers {"error": "..."} with status.
func writeError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
