// Command lock shows recipes.Mutex guarding a resource with fencing tokens.
//
// Start a server (go run ./cmd/arbord), then:
//
//	go run ./examples/lock -workers 4 -rounds 25
//
// Each worker has its own session, takes the lock on /examples/lock,
// increments a counter and hands the lock on. The counter lives in a
// fenced store, standing for a resource outside Arbor, that refuses a token
// lower than the highest it has accepted: what would stop a holder that
// lost its lock without noticing (a long pause, an expired session).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

func main() {
	servers := flag.String("servers", envOr("ARBOR_SERVERS", "127.0.0.1:2281"), "comma-separated server addresses")
	workers := flag.Int("workers", 4, "workers, each with its own session")
	rounds := flag.Int("rounds", 25, "increments per worker")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := &fencedStore{}
	var wg sync.WaitGroup
	for w := range *workers {
		c, err := client.Dial(ctx, strings.Split(*servers, ","))
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := recipes.NewMutex(c, "/examples/lock", recipes.WithData([]byte(fmt.Sprintf("worker %d, pid %d", w, os.Getpid()))))
			for range *rounds {
				if err := increment(ctx, c, m, store); err != nil {
					log.Printf("worker %d: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("counter: %d after %d increments; highest token accepted: %d\n",
		store.value, *workers**rounds, store.token)
}

// increment adds one to the counter under the lock.
func increment(ctx context.Context, c *client.Client, m *recipes.Mutex, store *fencedStore) error {
	if err := m.Lock(ctx); err != nil {
		return err
	}
	defer m.Unlock(ctx)
	select {
	case <-m.Lost():
		return errors.New("lost the lock before using it")
	default:
	}
	return store.write(m.Token(), func(v int) int { return v + 1 })
}

// fencedStore stands for a resource outside Arbor (a database, a file
// server) that checks the lock's fencing token on every write.
type fencedStore struct {
	mu    sync.Mutex
	token int64
	value int
}

func (s *fencedStore) write(token int64, update func(int) int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.token {
		return fmt.Errorf("fenced: token %d is older than %d", token, s.token)
	}
	s.token = token
	s.value = update(s.value)
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
