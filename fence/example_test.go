package fence_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/arbor-coord/arbor/fence"
)

func ExampleDir() {
	tmp, err := os.MkdirTemp("", "fence")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	d, err := fence.Open(tmp + "/store")
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	// Holder A has the lock with token 5 and writes.
	fmt.Println(d.Write("invoices", 5, "march", []byte("draft by A")))
	// A is paused; the lock passes to B, token 7, who writes.
	fmt.Println(d.Write("invoices", 7, "march", []byte("final by B")))
	// A wakes up and writes: refused.
	err = d.Write("invoices", 5, "march", []byte("late draft by A"))
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	fmt.Println(err)

	data, token, _ := d.Read("invoices", "march")
	fmt.Printf("%s, token %d\n", data, token)
	// Output:
	// <nil>
	// <nil>
	// true
	// fence: lock "invoices": token 5 is older than 7, the highest seen
	// final by B, token 7
}

func ExampleCheck() {
	// A store of your own keeps the highest token of each lock beside the
	// data, and checks and records it in the transaction of the write.
	highest := int64(7)
	for _, token := range []int64{5, 7, 9} {
		if err := fence.Check("accounts", highest, token); err != nil {
			fmt.Println(err)
			continue
		}
		highest = token
		fmt.Println("token", token, "writes")
	}
	// Output:
	// fence: lock "accounts": token 5 is older than 7, the highest seen
	// token 7 writes
	// token 9 writes
}
