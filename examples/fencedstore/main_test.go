package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/fence"
)

// startStore starts the service on a loopback port, over a new
// directory, and returns its base URL. It stops at the end of the test.
func startStore(t *testing.T) string {
	t.Helper()
	d, err := fence.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, d, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		d.Close()
	})
	return "http://" + ln.Addr().String()
}

// put writes body to url with token (none if empty) and returns the
// status and the error the answer names, if any.
func put(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Fencing-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct{ Error string }
	if resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
			t.Fatalf("PUT %s: status %d without a JSON error: %v", url, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, answer.Error
}

// get reads url and returns the status, the body and the token it was
// written with.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header.Get("X-Fencing-Token")
}

func TestALateWriteOfAHolderThatLostItsLockIsRefused(t *testing.T) {
	blob := startStore(t) + "/blobs/invoices/march"
	if status, msg := put(t, blob, "5", "by A"); status != http.StatusNoContent {
		t.Fatalf("holder A's write: %d %s", status, msg)
	}
	// A pauses; its lock passes to B, with token 7.
	if status, msg := put(t, blob, "7", "by B"); status != http.StatusNoContent {
		t.Fatalf("holder B's write: %d %s", status, msg)
	}
	// A wakes up and writes, believing it still holds the lock.
	status, msg := put(t, blob, "5", "late by A")
	if status != http.StatusConflict || !strings.Contains(msg, "token 5 is older than 7") {
		t.Fatalf("holder A's late write: %d %q, want 409 naming tokens 5 and 7", status, msg)
	}
	if status, body, token := get(t, blob); status != http.StatusOK || body != "by B" || token != "7" {
		t.Fatalf("GET = %d %q, token %q; want 200 \"by B\", token 7", status, body, token)
	}
}

func TestBadWritesAreRefusedWith400AndChangeNothing(t *testing.T) {
	base := startStore(t)
	blob := base + "/blobs/invoices/march"
	if status, msg := put(t, blob, "5", "by A"); status != http.StatusNoContent {
		t.Fatalf("%d %s", status, msg)
	}
	tests := []struct {
		name, url, token string
	}{
		{"a write without a token", blob, ""},
		{"a token that is not a number", blob, "five"},
		{"a negative token", blob, "-7"},
		{"a key that climbs out", base + "/blobs/invoices/..%2F..%2Fx", "7"},
		{"a lock name that climbs out", base + "/blobs/..%2Fx/march", "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, msg := put(t, tt.url, tt.token, "bad"); status != http.StatusBadRequest || msg == "" {
				t.Fatalf("PUT = %d %q, want 400 with an error", status, msg)
			}
		})
	}
	if status, body, token := get(t, blob); status != http.StatusOK || body != "by A" || token != "5" {
		t.Fatalf("GET = %d %q, token %q; want 200 \"by A\", token 5", status, body, token)
	}
	if status, _, _ := get(t, base+"/blobs/invoices/april"); status != http.StatusNotFound {
		t.Fatalf("GET of a missing blob = %d, want 404", status)
	}
}
