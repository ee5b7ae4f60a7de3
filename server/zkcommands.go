package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// ZooKeeper's commands, as ZooKeeper 3.9 answers them in two places: as
// four-letter words on the client port (fourletter.go), in text, and as
// its AdminServer's JSON under /commands/ on the http listener. Each
// command gathers what it reports once, into a value that renders both
// ways: writeText is the four-letter word's layout; the value's JSON
// encoding is the AdminServer's answer (the fields of ZooKeeper's Jackson
// output, in snake_case), to which the caller adds "command" and "error".

// zkNotServing is ZooKeeper's answer from a server that serves no clients.
const zkNotServing = "This ZooKeeper instance is not currently serving requests"

// zkCommand is one of ZooKeeper's commands.
type zkCommand struct {
	names []string // ZooKeeper's names for it, its primary one first
	word  string   // its four-letter word; "" for an AdminServer command alone
	// wordAlways and httpAlways: the command is answered even while the
	// member serves no clients, as a four-letter word and over http;
	// otherwise the answer is zkNotServing, as ZooKeeper's (over http:
	// for the commands it marks serverRequired).
	wordAlways, httpAlways bool
	run                    func(s *Server, q commandQuery) commandResult
}

// commandQuery is what a command needs to know of who asks.
type commandQuery struct {
	// mayList reports whether the asker may see a znode's path listed,
	// called with the tree under the fsm's read lock; nil lets every path
	// through (the superuser). ZooKeeper lists every path to whoever
	// reaches its port; Arbor only those the asker's identities may read.
	mayList func(t *tree.Tree, path string) bool
	// text is set for a four-letter word: what only the JSON answer shows
	// (the data directory's size, a walk of it) is not gathered.
	text bool
}

// commandResult is what a command gathered. Its JSON encoding is an
// object: the AdminServer's fields of the command.
type commandResult interface {
	// writeText writes the four-letter word's answer.
	writeText(b *bytes.Buffer)
}

// zkCommands are the commands answered, in ZooKeeper's names.
var zkCommands = []*zkCommand{
	{names: []string{"ruok"}, word: "ruok", wordAlways: true,
		run: func(*Server, commandQuery) commandResult { return ruokResult{} }},
	{names: []string{"is_read_only", "isro"}, word: "isro",
		run: func(s *Server, _ commandQuery) commandResult { return readOnlyResult{ReadOnly: s.readOnlyMode()} }},
	{names: []string{"server_stats", "srvr"}, word: "srvr",
		run: func(s *Server, q commandQuery) commandResult { return s.serverStats(q) }},
	{names: []string{"stats", "stat"}, word: "stat",
		run: func(s *Server, q commandQuery) commandResult { return s.statsWithClients(q) }},
	{names: []string{"monitor", "mntr"}, word: "mntr", httpAlways: true,
		run: func(s *Server, _ commandQuery) commandResult { return s.monitor() }},
	{names: []string{"configuration", "conf", "config"}, word: "conf",
		run: func(s *Server, _ commandQuery) commandResult { return s.configuration() }},
	{names: []string{"connections", "cons"}, word: "cons",
		run: func(s *Server, _ commandQuery) commandResult { return s.connections() }},
	{names: []string{"dirs"}, word: "dirs",
		run: func(s *Server, _ commandQuery) commandResult { return s.dirs() }},
	{names: []string{"dump"}, word: "dump",
		run: func(s *Server, q commandQuery) commandResult { return s.dump(q) }},
	{names: []string{"environment", "env", "envi"}, word: "envi", wordAlways: true, httpAlways: true,
		run: func(s *Server, _ commandQuery) commandResult { return s.environment() }},
	{names: []string{"watch_summary", "wchs"}, word: "wchs",
		run: func(s *Server, _ commandQuery) commandResult { return s.watchSummary() }},
	{names: []string{"watches", "wchc"}, word: "wchc",
		run: func(s *Server, q commandQuery) commandResult { return s.watchesBySession(q) }},
	{names: []string{"watches_by_path", "wchp"}, word: "wchp",
		run: func(s *Server, q commandQuery) commandResult { return s.watchesByPath(q) }},
	{names: []string{"leader", "lead"},
		run: func(s *Server, _ commandQuery) commandResult { return s.leaderInfo() }},
	{names: []string{"voting_view"},
		run: func(s *Server, _ commandQuery) commandResult { return s.votingView() }},
	{names: []string{"observers", "obsr"},
		run: func(s *Server, _ commandQuery) commandResult { return s.observersInfo() }},
}

// commandByWord is the command of a four-letter word, nil if none.
func commandByWord(word string) *zkCommand {
	for _, c := range zkCommands {
		if c.word == word {
			return c
		}
	}
	return nil
}

// commandNamed is the command of one of its names, nil if none.
func commandNamed(name string) *zkCommand {
	for _, c := range zkCommands {
		if slices.Contains(c.names, name) {
			return c
		}
	}
	return nil
}

// failedResult is a command's answer that is an error of the command's
// own (ZooKeeper's leader command on a standalone server): its JSON has
// no fields but "error".
type failedResult string

func (failedResult) writeText(*bytes.Buffer)      {}
func (failedResult) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

// commandJSON is the AdminServer's answer: res's fields, then "command"
// (the command's name) and "error" (null, or errText), indented as
// ZooKeeper's Jackson output is. res may be nil.
func commandJSON(command string, res commandResult, errText string) ([]byte, error) {
	body := []byte("{}")
	if res != nil {
		var err error
		if body, err = json.Marshal(res); err != nil {
			return nil, err
		}
		if f, ok := res.(failedResult); ok {
			errText = string(f)
		}
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("%s: a result that is not an object: %.40s", command, body)
	}
	out := bytes.NewBuffer(body[: len(body)-1 : len(body)-1])
	if len(body) > 2 {
		out.WriteByte(',')
	}
	name, _ := json.Marshal(command)
	fmt.Fprintf(out, `"command":%s,"error":`, name)
	if errText == "" {
		out.WriteString("null")
	} else {
		e, _ := json.Marshal(errText)
		out.Write(e)
	}
	out.WriteByte('}')
	var indented bytes.Buffer
	if err := json.Indent(&indented, out.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	indented.WriteByte('\n')
	return indented.Bytes(), nil
}

// handleZKCommands adds ZooKeeper's AdminServer commands to mux: GET
// /commands lists them, GET /commands/NAME answers one, by any of its
// names. The path is ZooKeeper's, not under /api/v1/, for the scripts
// written against ZooKeeper's AdminServer.
func (s *Server) handleZKCommands(mux *http.ServeMux) {
	mux.HandleFunc("GET /commands", serveCommandList)
	mux.HandleFunc("GET /commands/{$}", serveCommandList)
	mux.HandleFunc("GET /commands/{name...}", s.serveCommand)
	mux.HandleFunc("/commands", methodNotAllowed("GET"))
	mux.HandleFunc("/commands/", methodNotAllowed("GET"))
}

// serveCommandList answers as ZooKeeper's AdminServer does at /commands:
// a link to each command, by its primary name, sorted.
func serveCommandList(w http.ResponseWriter, _ *http.Request) {
	names := make([]string, 0, len(zkCommands))
	for _, c := range zkCommands {
		names = append(names, c.names[0])
	}
	slices.Sort(names)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "<a href=\"/commands/%s\">%s</a>\n<br/>\n", n, n)
	}
	_, _ = w.Write([]byte(b.String()))
}

// serveCommand answers GET /commands/NAME as ZooKeeper's AdminServer does:
// 200 and JSON, with the command's error in "error", an unknown command's
// too. The paths a command lists are those the asker's identities (a
// login, basic auth; see HTTPIdentities) may read, as in the sessions
// view.
func (s *Server) serveCommand(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	cmd := commandNamed(name)
	var res commandResult
	var errText string
	switch {
	case cmd == nil:
		errText = "Unknown command: " + name
	case !cmd.httpAlways && !s.servesClients():
		errText = zkNotServing
	default:
		name = cmd.names[0]
		res = cmd.run(s, commandQuery{mayList: s.listableBy(s.HTTPIdentities(r))})
	}
	body, err := commandJSON(name, res, errText)
	if err != nil {
		writeJSON(w, nil, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// listableBy is who may see a path listed, for ids: the superuser every
// path; others a znode's path if they may read it, and a path without a
// znode (an exists watch's) if they may read its nearest existing
// ancestor, the node that would list it. Its t is the meta group's tree,
// whose read lock the caller holds; each path is checked in its shard.
func (s *Server) listableBy(ids []wire.Identity) func(t *tree.Tree, path string) bool {
	if super(ids) {
		return nil
	}
	return func(t *tree.Tree, p string) bool {
		for {
			var err error
			if e := s.inShardOf(t, p, func(t *tree.Tree) { err = t.Check(p, ids, wire.PermRead) }); e != nil {
				return false
			}
			if !errors.Is(err, wire.ErrNoNode) || p == "/" {
				return err == nil
			}
			p = parent(p)
		}
	}
}

// keyValue is one entry of an ordered result (monitor, environment).
type keyValue struct {
	key   string
	value any // an integer, a float64 or a string
}

// orderedValues encode as a JSON object with their keys in order, as
// ZooKeeper's LinkedHashMaps do.
type orderedValues []keyValue

func (o orderedValues) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(kv.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(kv.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// text is a value as ZooKeeper prints it: a float64 as Java's
// Double.toString, anything else as Go's %v.
func text(v any) string {
	if f, ok := v.(float64); ok {
		return javaDouble(f)
	}
	return fmt.Sprint(v)
}

// javaDouble formats f as Java's Double.toString does ("0.0", "1.5",
// "1.0E-4", "1.0E7"), as ZooKeeper prints its averages.
func javaDouble(f float64) string {
	if a := math.Abs(f); a == 0 || a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'E', -1, 64), "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// round4 rounds to four decimals, as ZooKeeper's averages are
// (AvgMinMaxCounter.getAvg).
func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }
