package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/arbor-coord/arbor/client"
)

// The JSON that -o json prints. It is documented in docs/cli.md and stays
// stable: fields may be added, never renamed or removed. Each JSON value is
// printed on one line, so a command that prints a stream (watch, get -w,
// ls -w) prints JSON lines.

// statJSON is a Stat with ZooKeeper's field names. Session ids travel as
// hex strings ("0x..."): they use all 64 bits, more than a JSON number
// holds exactly in many parsers.
type statJSON struct {
	Czxid          int64  `json:"czxid"`
	Mzxid          int64  `json:"mzxid"`
	Pzxid          int64  `json:"pzxid"`
	Ctime          int64  `json:"ctime"` // ms since the Unix epoch
	Mtime          int64  `json:"mtime"`
	Version        int32  `json:"version"`
	Cversion       int32  `json:"cversion"`
	Aversion       int32  `json:"aversion"`
	EphemeralOwner string `json:"ephemeralOwner"`
	DataLength     int32  `json:"dataLength"`
	NumChildren    int32  `json:"numChildren"`
}

func statOf(st client.Stat) *statJSON {
	return &statJSON{
		Czxid: st.Czxid, Mzxid: st.Mzxid, Pzxid: st.Pzxid, Ctime: st.Ctime, Mtime: st.Mtime,
		Version: st.Version, Cversion: st.Cversion, Aversion: st.Aversion,
		EphemeralOwner: sessionHex(st.EphemeralOwner),
		DataLength:     st.DataLength, NumChildren: st.NumChildren,
	}
}

// dataJSON is a node's data: the text when it is valid UTF-8, else its
// base64, and which of the two.
type dataJSON struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding"` // "utf8" or "base64"
}

func dataOf(b []byte) dataJSON {
	if utf8.Valid(b) {
		return dataJSON{Data: string(b), Encoding: "utf8"}
	}
	return dataJSON{Data: base64.StdEncoding.EncodeToString(b), Encoding: "base64"}
}

// eventJSON is a watch event. The NodeCreated and NodeDataChanged events
// of watch (persistent and recursive watches) also carry the node's data
// right after the change; those of get -w and ls -w (one-shot) do not.
type eventJSON struct {
	Type      string `json:"type"`
	Path      string `json:"path"`
	Zxid      int64  `json:"zxid"` // of the change; 0 when not known
	*dataJSON        // omitted when nil
}

// sessionHex writes a session id (or a zxid) as zkCli does: 0x and the
// unsigned hex of its 64 bits.
func sessionHex(id int64) string { return "0x" + strconv.FormatUint(uint64(id), 16) }

func (e *env) json() bool { return e.output == "json" }

// printJSON prints v as one line of JSON.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printEvent prints a watch event: "TYPE PATH", or its JSON.
func (e *env) printEvent(ev client.Event) error {
	if e.json() {
		out := eventJSON{Type: ev.Type.String(), Path: ev.Path, Zxid: ev.Zxid}
		if ev.Stat.Czxid != 0 { // the event carries the node
			d := dataOf(ev.Data)
			out.dataJSON = &d
		}
		return e.printJSON(out)
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", ev.Type, ev.Path)
	return err
}

// writeStat prints a Stat the way zkCli does, one field per line.
func writeStat(w io.Writer, st client.Stat) {
	ms := func(v int64) string { return time.UnixMilli(v).UTC().Format(time.RFC3339Nano) }
	hex := sessionHex
	fmt.Fprintf(w, "czxid = %s\nctime = %s\nmzxid = %s\nmtime = %s\npzxid = %s\n",
		hex(st.Czxid), ms(st.Ctime), hex(st.Mzxid), ms(st.Mtime), hex(st.Pzxid))
	fmt.Fprintf(w, "cversion = %d\ndataVersion = %d\naclVersion = %d\nephemeralOwner = %s\ndataLength = %d\nnumChildren = %d\n",
		st.Cversion, st.Version, st.Aversion, hex(st.EphemeralOwner), st.DataLength, st.NumChildren)
}
