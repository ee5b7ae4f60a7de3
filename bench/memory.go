package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MemberMemory is what a member's /metrics said of its memory at the end
// of a run (Config.ServerMetrics).
type MemberMemory struct {
	URL            string  `json:"url"`
	RSSBytes       float64 `json:"rssBytes"`       // process_resident_memory_bytes
	HeapInuseBytes float64 `json:"heapInuseBytes"` // go_memstats_heap_inuse_bytes
	Error          string  `json:"error,omitempty"`
}

// memoryGauges are the gauges of /metrics a MemberMemory keeps.
var memoryGauges = map[string]func(m *MemberMemory, v float64){
	"process_resident_memory_bytes": func(m *MemberMemory, v float64) { m.RSSBytes = v },
	"go_memstats_heap_inuse_bytes":  func(m *MemberMemory, v float64) { m.HeapInuseBytes = v },
}

// serverMemory reads each member's memory from its metrics URL, within
// timeout each.
func serverMemory(ctx context.Context, urls []string, timeout time.Duration) []MemberMemory {
	out := make([]MemberMemory, len(urls))
	for i, u := range urls {
		out[i].URL = u
		if err := readMemory(ctx, u, timeout, &out[i]); err != nil {
			out[i].Error = err.Error()
		}
	}
	return out
}

func readMemory(ctx context.Context, url string, timeout time.Duration, m *MemberMemory) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		set := memoryGauges[name]
		if !ok || set == nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", url, name, err)
		}
		set(m, v)
		found++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if found < len(memoryGauges) {
		return fmt.Errorf("%s: no process_resident_memory_bytes and go_memstats_heap_inuse_bytes (is it a member's /metrics?)", url)
	}
	return nil
}

// writeMemoryText writes the members' memory lines of a text report.
func writeMemoryText(b *strings.Builder, mems []MemberMemory) {
	for i, m := range mems {
		label := "            "
		if i == 0 {
			label = "memory      "
		}
		if m.Error != "" {
			fmt.Fprintf(b, "%s%s: %s\n", label, m.URL, m.Error)
			continue
		}
		fmt.Fprintf(b, "%s%s: RSS %.0f MB, heap in use %.0f MB\n", label, m.URL, m.RSSBytes/1e6, m.HeapInuseBytes/1e6)
	}
}
