package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// A Mutex guards work that a resource outside Arbor checks with the fencing
// token.
func ExampleMutex() {
	ctx := context.Background()
	c, err := client.Dial(ctx, []string{"127.0.0.1:2281"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := recipes.NewMutex(c, "/locks/billing", recipes.WithData([]byte("host-a pid 4242")))
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	fmt.Println("holding with token", m.Token())
	select {
	case <-m.Lost():
		log.Fatal("the session ended: someone else may hold the lock now")
	default:
		// Write to the resource, passing m.Token() along.
	}
}

// A holder bound to a lease checks its stop-by deadline before each step:
// no one else can have been granted the lock before it, whatever partition
// may have cut this process off meanwhile.
func ExampleMutex_Deadline() {
	ctx := context.Background()
	c, err := client.Dial(ctx, []string{"127.0.0.1:2281"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := recipes.NewMutex(c, "/locks/reports", recipes.WithLease(30*time.Second))
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	for _, step := range []string{"extract", "transform", "load"} {
		const worst = 5 * time.Second // the longest a step takes
		if time.Until(m.Deadline()) < worst {
			log.Fatalf("%s: not enough time left on the lock (%v)", step, m.LostReason())
		}
		fmt.Println("running", step, "with token", m.Token())
	}
}

// A candidate campaigns, leads until its session ends or it resigns, and
// steps down when Lost is closed.
func ExampleElection() {
	ctx := context.Background()
	c, err := client.Dial(ctx, []string{"127.0.0.1:2281"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e := recipes.NewElection(c, "/service/leader")
	if err := e.Campaign(ctx, []byte("10.0.0.7:8080")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading with token", e.Token())
	select {
	case <-e.Lost(): // stop acting as the leader at once
	case <-ctx.Done():
		if err := e.Resign(context.Background()); err != nil && !errors.Is(err, client.ErrSessionExpired) {
			log.Print(err)
		}
	}
}

// Observers follow the leader without campaigning.
func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.Dial(ctx, []string{"127.0.0.1:2281"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for leader := range recipes.NewElection(c, "/service/leader").Observe(ctx) {
		fmt.Printf("the leader is now at %s\n", leader)
	}
}

// A Semaphore lets at most n holders in at once.
func ExampleSemaphore() {
	ctx := context.Background()
	c, err := client.Dial(ctx, []string{"127.0.0.1:2281"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	lease, err := recipes.NewSemaphore(c, "/limits/db-connections", 10).Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// At most 10 processes are here at once.
}
