package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// Storm is a reconnect storm in the locks workload. After into the
// measured phase, the run notes which member each of its sessions is
// connected to and calls Kill, which must kill Member at once (arbor
// bench's --storm-pid sends it SIGKILL). It then measures how the
// sessions that were on Member come back on the other members, and what
// the holders lost: sessions that expired, holds that ended by themselves
// (recipes.Mutex.Lost) and, once every session is back, holds the servers
// no longer have.
//
// To know each session's member, the run dials the servers itself
// (client.WithDialer, plain TCP under any TLS): a dialer among
// Config.ClientOptions is not used.
type Storm struct {
	After  time.Duration
	Member string       // the member Kill kills: its address as in Config.Servers
	Kill   func() error // called once, on a goroutine of the run's own
}

// check reports what is wrong with s in c; nil for no storm.
func (s *Storm) check(c Config) error {
	switch {
	case s == nil:
		return nil
	case c.Workload != "locks":
		return fmt.Errorf("a storm is for the locks workload, not %s", c.Workload)
	case s.After <= 0 || s.After >= c.Duration:
		return fmt.Errorf("the storm must come within the measured phase (%v), not after %v", c.Duration, s.After)
	case !slices.Contains(c.Servers, s.Member):
		return fmt.Errorf("the storm's member %s is not one of the servers", s.Member)
	case s.Kill == nil:
		return errors.New("the storm has no way to kill its member")
	}
	return nil
}

// tracked is one session of a storm's run and the state changes it went
// through.
type tracked struct {
	c *client.Client

	mu   sync.Mutex
	seen []stateSeen // mu guards seen
}

// stateSeen is a state change of a session, as follow saw it.
type stateSeen struct {
	state  client.State
	member string // the server the client was connected to then ("" if none)
	at     time.Time
	err    error // StateExpired: why, as the client says (Client.Err)
}

// follow records the session's state changes until Close ends them.
func (t *tracked) follow() {
	for s := range t.c.StateChanges() {
		seen := stateSeen{state: s, member: t.c.Server(), at: time.Now()}
		if s == client.StateExpired {
			seen.err = t.c.Err()
		}
		t.mu.Lock()
		t.seen = append(t.seen, seen)
		t.mu.Unlock()
	}
}

// last returns the latest state change seen (the zero one if none).
func (t *tracked) last() stateSeen {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.seen) == 0 {
		return stateSeen{}
	}
	return t.seen[len(t.seen)-1]
}

// firstAfter returns the first change to one of states seen after at.
func (t *tracked) firstAfter(at time.Time, states ...client.State) (stateSeen, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.seen {
		if s.at.After(at) && slices.Contains(states, s.state) {
			return s, true
		}
	}
	return stateSeen{}, false
}

// holding is what one holder of a storm's run holds, for the census.
type holding struct {
	token   atomic.Int64 // the fencing token of its hold; 0 while it holds nothing
	lock    string       // the lock's path
	owner   string       // the owner its lock node names
	session *tracked
}

// storm runs a Storm beside the loops of the locks workload and keeps what
// it saw. The fields from victims on are set by run alone, and read only
// once the run is over.
type storm struct {
	cfg      Storm
	leased   bool   // the holds are bound to leases: their nodes' session is the lease
	root     string // the locks' parent
	sessions []*tracked
	holders  []*holding

	lossMu sync.Mutex
	losses map[string]int // holds that ended by themselves, by reason; lossMu guards it

	victims          []*tracked     // connected to cfg.Member when it was killed
	byMember         map[string]int // the sessions connected to each member then
	killedAt         time.Time      // zero: the run ended before the kill
	killErr          error
	checked, missing int // the census's
	checkErr         error
	censusTaken      bool
}

// newStorm makes the storm of cfg, whose locks are under root.
func newStorm(cfg Config, root string) *storm {
	return &storm{cfg: *cfg.Storm, leased: cfg.Lease > 0, root: root,
		sessions: make([]*tracked, cfg.Conns), losses: map[string]int{}, byMember: map[string]int{}}
}

// follow starts following the state changes of the sessions cs.
func (s *storm) follow(cs []*client.Client) {
	for i, c := range cs {
		s.sessions[i] = &tracked{c: c}
		go s.sessions[i].follow()
	}
}

// holder returns the holding of a holder of lock, owned by owner, on
// session i; nil when s is nil (no storm).
func (s *storm) holder(lock, owner string, i int) *holding {
	if s == nil {
		return nil
	}
	hd := &holding{lock: lock, owner: owner, session: s.sessions[i]}
	s.holders = append(s.holders, hd)
	return hd
}

// held notes that hd holds the hold of token. s may be nil.
func (s *storm) held(hd *holding, token int64) {
	if s != nil {
		hd.token.Store(token)
	}
}

// releasing notes that hd's hold of m ends, before its release is sent,
// and returns why the hold ended by itself, if it did (m.LostReason).
// s may be nil.
func (s *storm) releasing(hd *holding, m *recipes.Mutex) error {
	if s == nil {
		return nil
	}
	hd.token.Store(0)
	return m.LostReason()
}

// released counts a hold as lost if it ended by itself (lost, from
// releasing) or if its release (err, Unlock's error) found that it had:
// its node gone, its session or lease over. s may be nil.
func (s *storm) released(lost, err error) {
	if s == nil {
		return
	}
	kind := lossKind(lost)
	if lost != nil && kind == "" {
		kind = "other"
	}
	if lost == nil {
		kind = lossKind(err)
	}
	if kind == "" {
		return
	}
	s.lossMu.Lock()
	s.losses[kind]++
	s.lossMu.Unlock()
}

// lossKind names why a hold was lost, in a report, or "" if err does not
// say that it was.
func lossKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, client.ErrSessionExpired):
		return "session expired"
	case errors.Is(err, client.ErrLeaseExpired):
		return "lease expired"
	case errors.Is(err, recipes.ErrDeadlinePassed):
		return "deadline passed"
	case errors.Is(err, recipes.ErrBroken):
		return "broken"
	case errors.Is(err, recipes.ErrNodeDeleted):
		return "node deleted"
	}
	return ""
}

// run waits until After into the measured phase, notes the sessions on
// the member and kills it, waits until each of those sessions is
// connected again or expired, and then checks the holds on the servers.
// It gives up waiting when the measured phase ends.
func (s *storm) run(r *runner) {
	select {
	case <-r.measuring:
	case <-r.stopped.Done():
		return
	}
	if !sleepUntil(r.stopped, r.start.Add(time.Duration(r.measureAt.Load())+s.cfg.After)) {
		return
	}
	for _, t := range s.sessions {
		now := t.last()
		if now.state != client.StateConnected {
			continue
		}
		s.byMember[now.member]++
		if now.member == s.cfg.Member {
			s.victims = append(s.victims, t)
		}
	}
	s.killedAt = time.Now()
	if s.killErr = s.cfg.Kill(); s.killErr != nil {
		return
	}
	if !s.waitBack(r.stopped) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	s.checked, s.missing, s.checkErr = s.census(ctx)
	s.censusTaken = true
}

// waitBack waits until every victim has been connected again or has
// expired since the kill, and reports whether they all had before ctx
// ended. The times come from the sessions' own records, not from this
// poll.
func (s *storm) waitBack(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	left := slices.Clone(s.victims)
	for {
		left = slices.DeleteFunc(left, func(t *tracked) bool {
			_, ok := t.firstAfter(s.killedAt, client.StateConnected, client.StateExpired)
			return ok
		})
		if len(left) == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// census checks the holds against the servers, once there is a leader to
// answer a linearizable read. A holder that held the
// same hold (the same fencing token) before and after a linearizable read
// of every lock must be among its lock's holders in that read, with its
// owner and, for a hold of the session, its session. It returns how many
// holds it checked and how many of them the servers did not have.
func (s *storm) census(ctx context.Context) (checked, missing int, err error) {
	var c *client.Client
	for _, t := range s.sessions {
		if t.last().state == client.StateConnected {
			c = t.c
			break
		}
	}
	if c == nil {
		return 0, 0, errors.New("no session is connected")
	}
	before := s.tokens()
	locks, err := c.Locks(ctx, s.root, true)
	for errors.Is(err, client.ErrNoQuorum) && sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
		// The sessions may be back before a new leader is elected.
		before = s.tokens()
		locks, err = c.Locks(ctx, s.root, true)
	}
	if err != nil {
		return 0, 0, err
	}
	after := s.tokens()
	type key struct {
		lock  string
		token int64
	}
	have := map[key]client.LockParty{}
	for _, l := range locks {
		for _, p := range l.Holders {
			have[key{l.Path, p.Token}] = p
		}
	}
	for i, hd := range s.holders {
		if before[i] == 0 || before[i] != after[i] {
			continue
		}
		checked++
		p, ok := have[key{hd.lock, before[i]}]
		if !ok || p.Owner != hd.owner || !s.leased && p.Session != hd.session.c.SessionID() {
			missing++
		}
	}
	return checked, missing, nil
}

// tokens returns each holder's current token.
func (s *storm) tokens() []int64 {
	out := make([]int64, len(s.holders))
	for i, hd := range s.holders {
		out[i] = hd.token.Load()
	}
	return out
}

// StormReport is what a reconnect storm (Config.Storm) did, in a Report.
// Durations are in milliseconds.
type StormReport struct {
	Member     string  `json:"member"`     // the member killed
	AfterMs    float64 `json:"afterMs"`    // into the measured phase, as asked
	KilledAtMs float64 `json:"killedAtMs"` // into the measured phase, as it was; 0 if the run ended first
	KillError  string  `json:"killError,omitempty"`

	Sessions int            `json:"sessions"` // the run's sessions
	ByMember map[string]int `json:"byMember"` // those connected to each member when Member was killed
	OnMember int            `json:"onMember"` // connected to Member then
	Back     int            `json:"back"`     // of those, connected again before the run ended
	// Noticed is the time from the kill to each of those sessions'
	// StateDisconnected; Reconnect to its StateConnected again, and
	// AllBackMs the last of those, 0 unless every session came back.
	Noticed   Latency `json:"noticedMs"`
	Reconnect Latency `json:"reconnectMs"`
	AllBackMs float64 `json:"allBackMs"`
	// OthersDisconnected counts the sessions on the other members whose
	// connection broke after the kill; DisconnectedBefore those whose
	// connection broke in the run before the kill (a member that drops
	// its clients, say, as one does when it installs a snapshot).
	OthersDisconnected int `json:"othersDisconnected"`
	DisconnectedBefore int `json:"disconnectedBefore"`

	SessionsLost int `json:"sessionsLost"` // sessions that expired in the run, on any member
	// SessionLoss is why the first of them expired, as its client said:
	// "no server heard from for the session timeout" is the client
	// giving its session up, else the cluster told it.
	SessionLoss string         `json:"sessionLoss,omitempty"`
	HoldsLost   int            `json:"holdsLost"`   // holds that ended by themselves in the run (recipes.Mutex.Lost)
	HoldsLostBy map[string]int `json:"holdsLostBy"` // the same by reason: "session expired", "deadline passed", ...
	LeasesLost  int            `json:"leasesLost"`  // of those, holds whose lease expired

	// Once every session on Member was back (CensusTaken), the holds were
	// checked on the servers: Checked holds, of which Missing were not
	// there.
	CensusTaken bool   `json:"censusTaken"`
	Checked     int    `json:"checked"`
	Missing     int    `json:"missing"`
	CensusError string `json:"censusError,omitempty"`
}

// report says what the storm did, once the run is over.
func (s *storm) report(r *runner) *StormReport {
	rep := &StormReport{Member: s.cfg.Member, AfterMs: ms(s.cfg.After), Sessions: len(s.sessions),
		ByMember: maps.Clone(s.byMember), OnMember: len(s.victims), HoldsLostBy: map[string]int{}, CensusTaken: s.censusTaken,
		Checked: s.checked, Missing: s.missing}
	if s.killErr != nil {
		rep.KillError = s.killErr.Error()
	}
	if s.checkErr != nil {
		rep.CensusError = s.checkErr.Error()
	}
	for k, n := range s.losses {
		rep.HoldsLostBy[k] = n
		rep.HoldsLost += n
	}
	rep.LeasesLost = s.losses["lease expired"]
	var first stateSeen
	for _, t := range s.sessions {
		ex, ok := t.firstAfter(time.Time{}, client.StateExpired)
		if !ok {
			continue
		}
		rep.SessionsLost++
		if first.at.IsZero() || ex.at.Before(first.at) {
			first = ex
		}
	}
	if first.err != nil {
		rep.SessionLoss = first.err.Error()
	}
	if s.killedAt.IsZero() {
		return rep
	}
	for _, t := range s.sessions {
		if gone, ok := t.firstAfter(time.Time{}, client.StateDisconnected); ok && gone.at.Before(s.killedAt) {
			rep.DisconnectedBefore++
		}
	}
	rep.KilledAtMs = ms(s.killedAt.Sub(r.start.Add(time.Duration(r.measureAt.Load()))))
	var noticed, back histogram
	for _, t := range s.victims {
		if gone, ok := t.firstAfter(s.killedAt, client.StateDisconnected); ok {
			noticed.record(gone.at.Sub(s.killedAt))
		}
		if again, ok := t.firstAfter(s.killedAt, client.StateConnected); ok {
			back.record(again.at.Sub(s.killedAt))
			rep.Back++
		}
	}
	rep.Noticed, rep.Reconnect = latencyOf(&noticed), latencyOf(&back)
	if rep.Back == rep.OnMember {
		rep.AllBackMs = rep.Reconnect.Max
	}
	victim := make(map[*tracked]bool, len(s.victims))
	for _, t := range s.victims {
		victim[t] = true
	}
	for _, t := range s.sessions {
		if victim[t] {
			continue
		}
		if _, ok := t.firstAfter(s.killedAt, client.StateDisconnected); ok {
			rep.OthersDisconnected++
		}
	}
	return rep
}

// writeText writes the storm's lines of the text report; leased says
// whether the holds were bound to leases.
func (s *StormReport) writeText(b *strings.Builder, leased bool) {
	switch {
	case s.KillError != "":
		fmt.Fprintf(b, "storm       could not kill %s: %s\n", s.Member, s.KillError)
	case s.KilledAtMs == 0:
		fmt.Fprintf(b, "storm       the measured phase ended before the kill of %s\n", s.Member)
	default:
		fmt.Fprintf(b, "storm       killed %s %s into the measured phase: %d of %d sessions were on it\n",
			s.Member, msDuration(s.KilledAtMs), s.OnMember, s.Sessions)
		b.WriteString("spread     ")
		for i, m := range slices.Sorted(maps.Keys(s.ByMember)) {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(b, "%s %s %d", sep, m, s.ByMember[m])
		}
		b.WriteString(" sessions connected at the kill\n")
		if s.OnMember > 0 {
			fmt.Fprintf(b, "noticed     %s\n", s.Noticed)
		}
		switch {
		case s.OnMember == 0:
		case s.Back == s.OnMember:
			fmt.Fprintf(b, "reconnect   all %d back within %s of the kill: %s\n", s.Back, msDuration(s.AllBackMs), s.Reconnect)
		default:
			fmt.Fprintf(b, "reconnect   %d of %d back before the run ended: %s\n", s.Back, s.OnMember, s.Reconnect)
		}
		fmt.Fprintf(b, "others      %d sessions on the other members lost their connection\n", s.OthersDisconnected)
		if s.DisconnectedBefore > 0 {
			fmt.Fprintf(b, "before      %d sessions lost their connection before the kill\n", s.DisconnectedBefore)
		}
	}
	fmt.Fprintf(b, "lost        sessions %d, holds %d", s.SessionsLost, s.HoldsLost)
	for i, k := range slices.Sorted(maps.Keys(s.HoldsLostBy)) {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(b, "%s%s %d", sep, k, s.HoldsLostBy[k])
	}
	if len(s.HoldsLostBy) > 0 {
		b.WriteString(")")
	}
	if leased {
		fmt.Fprintf(b, ", leases %d", s.LeasesLost)
	}
	b.WriteString("\n")
	if s.SessionLoss != "" {
		fmt.Fprintf(b, "first loss  %s\n", s.SessionLoss)
	}
	switch {
	case s.CensusError != "":
		fmt.Fprintf(b, "census      could not check the holds on the servers: %s\n", s.CensusError)
	case s.CensusTaken:
		fmt.Fprintf(b, "census      %d holds checked on the servers once all were back: %d missing\n", s.Checked, s.Missing)
	case s.KillError == "" && s.KilledAtMs != 0:
		b.WriteString("census      not taken: the measured phase ended before every session was back\n")
	}
}
