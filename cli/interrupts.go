package cli

import (
	"context"
	"os"
	"sync"
	"syscall"
)

// interrupts turns SIGINT and SIGTERM into cancellations. SIGTERM cancels
// base, and so everything. SIGINT cancels the innermost scope, a command
// the interactive shell runs, so that Ctrl-C ends a watch and not the
// shell; without a scope it cancels base too.
type interrupts struct {
	base   context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	scopes []context.CancelFunc // mu guards scopes, innermost last
}

func newInterrupts() *interrupts {
	ctx, cancel := context.WithCancel(context.Background())
	return &interrupts{base: ctx, cancel: cancel}
}

// scope returns a context that the next SIGINT cancels instead of base,
// and the function that ends the scope.
func (in *interrupts) scope(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	in.mu.Lock()
	in.scopes = append(in.scopes, cancel)
	n := len(in.scopes)
	in.mu.Unlock()
	return ctx, func() {
		cancel()
		in.mu.Lock()
		if len(in.scopes) >= n {
			in.scopes = in.scopes[:n-1]
		}
		in.mu.Unlock()
	}
}

// deliver acts on one signal.
func (in *interrupts) deliver(sig os.Signal) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if sig == syscall.SIGINT && len(in.scopes) > 0 {
		in.scopes[len(in.scopes)-1]()
		in.scopes = in.scopes[:len(in.scopes)-1]
		return
	}
	in.cancel()
}

// forward delivers the signals of sigs until the returned function is
// called, which also cancels base.
func (in *interrupts) forward(sigs <-chan os.Signal) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case sig := <-sigs:
				in.deliver(sig)
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		in.cancel()
	}
}
