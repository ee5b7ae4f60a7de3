package server

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// ZooKeeper's four-letter words, on the ZooKeeper port: a connection whose
// first four bytes are one of them gets a text answer and is closed. The
// answers have ZooKeeper's layout, so that the tools that parse them (the
// go-zookeeper FLW helpers, monitoring agents reading mntr) work. Each word
// is one of ZooKeeper's commands (zkcommands.go), whose JSON the http
// listener serves under /commands/.

// zkVersion is the ZooKeeper version Arbor answers as: the client protocol
// it speaks is 3.9's (whoAmI, persistent watches, multiRead).
const zkVersion = "3.9.0-arbor"

// otherFourLetterWords are ZooKeeper's words not answered here; they get
// ZooKeeper's answer for a word left out of its whitelist.
var otherFourLetterWords = []string{"reqs", "gtmk", "stmk", "crst", "srst", "hash"}

func isFourLetterWord(word string) bool {
	return commandByWord(word) != nil || slices.Contains(otherFourLetterWords, word)
}

// fourLetter answers word on c's connection. Paths are listed only where
// the connection's own identities (its address, its certificate) may read,
// as the /commands/ answers list them. An answer is held against the
// member's memory for replies until it is written, and a word that comes
// while that memory is full gets no answer: a client that asks for large
// answers (dump) over many connections and never reads them cannot make
// the member hold them without end.
func (s *Server) fourLetter(c *conn, word string) {
	if s.memory.repliesFull() {
		c.log.Info("four-letter word not answered: the memory for replies is full", zap.String("word", word))
		return
	}
	var b bytes.Buffer
	s.answerWord(&b, word, c.initialIdentities())
	n := int64(b.Len())
	s.memory.replies.Add(n)
	defer s.memory.replies.Add(-n)
	_ = c.nc.SetWriteDeadline(time.Now().Add(s.cfg.writeTimeout))
	if _, err := c.nc.Write(b.Bytes()); err != nil {
		c.log.Debug("four-letter word answer not sent", zap.String("word", word), zap.Error(err))
	}
}

// answerWord writes the answer to word for a client of identities ids:
// its command's text, or what ZooKeeper answers when its server serves no
// clients, or for a word left out of its whitelist (Config.FourLetterWords).
func (s *Server) answerWord(b *bytes.Buffer, word string, ids []wire.Identity) {
	cmd := commandByWord(word)
	switch {
	case cmd == nil || !s.wordAllowed(word):
		fmt.Fprintf(b, "%s is not executed because it is not in the whitelist.\n", word)
	case !cmd.wordAlways && !s.servesClients():
		if word == "isro" {
			b.WriteString("null") // ZooKeeper's IsroCommand, without a server
		} else {
			b.WriteString(zkNotServing + "\n")
		}
	default:
		cmd.run(s, commandQuery{mayList: s.listableBy(ids), text: true}).writeText(b)
	}
}

// wordAllowed reports whether Config.FourLetterWords lets word through.
func (s *Server) wordAllowed(word string) bool {
	return slices.Contains(s.cfg.FourLetterWords, "*") || slices.Contains(s.cfg.FourLetterWords, word)
}

// servesClients reports whether this member serves clients: it knows a
// leader, or it serves read-only.
func (s *Server) servesClients() bool {
	return s.node.Leader() != 0 || s.readOnlyMode()
}

// readOnlyMode reports whether this member serves read-only: it cannot
// vouch for sessions (no quorum it can reach) and read-only mode is on.
func (s *Server) readOnlyMode() bool {
	return !s.cfg.NoReadOnly && s.vouchForSessions() != nil
}

// mode is ZooKeeper's name for this member's role.
func (s *Server) mode() string {
	switch {
	case s.transport == nil:
		return "standalone"
	case s.readOnlyMode():
		return "read-only"
	case s.node.IsLeader():
		return "leader"
	case s.isLearner():
		return "observer"
	}
	return "follower"
}

// isLearner reports whether this member is a raft learner: ZooKeeper's
// observer.
func (s *Server) isLearner() bool {
	for _, m := range s.node.Members() {
		if m.ID == s.cfg.ID {
			return m.Learner
		}
	}
	return false
}

// versionLine is ZooKeeper's version string; the build date is the
// binary's modification time, in the layout the go-zookeeper FLW parser
// reads (ZooKeeper 3.9 writes "2024-02-12 20:59 UTC", which it does not).
func versionLine() string {
	built := time.Unix(0, 0)
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			built = fi.ModTime()
		}
	}
	return zkVersion + ", built on " + built.UTC().Format("01/02/2006 15:04 GMT")
}

// ms formats a duration in whole milliseconds, as ZooKeeper reports them.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// outstanding is the number of requests read and not yet answered.
func (s *Server) outstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		n += len(c.pending) + len(c.replies)
	}
	return n
}

// sessionConns lists the connections bound to a session (of either
// protocol), ordered by session id.
func (s *Server) sessionConns() []*conn {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.bySession))
	for id := range s.bySession {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*conn, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.bySession[id])
	}
	s.mu.Unlock()
	return out
}
