package sasl

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// ZooKeeper's server takes its DIGEST-MD5 users from the "Server" section
// of its JAAS configuration file, as options user_NAME="password" of the
// section's login module:
//
//	Server {
//	    org.apache.zookeeper.server.auth.DigestLoginModule required
//	    user_alice="alice-secret"
//	    user_bob="bob-secret";
//	};
//	Client {
//	    org.apache.zookeeper.server.auth.DigestLoginModule required
//	    username="bob"
//	    password="bob-secret";
//	};
//
// ParseJAAS reads that file's syntax (Java's default JAAS configuration:
// sections of login module entries, // and /* */ comments, values that
// are words or double-quoted strings with backslash escapes) and takes the
// users of one section; the other sections are read and left alone.

// DigestLoginModule is the login module of ZooKeeper's DIGEST-MD5 users.
const DigestLoginModule = "org.apache.zookeeper.server.auth.DigestLoginModule"

// ErrJAAS is wrapped by every error of ParseJAAS. Its messages give line
// numbers and never quote a value, which may be a password.
var ErrJAAS = errors.New("JAAS configuration")

// Limits of ParseJAAS, beyond which a file is refused: a users file is
// small, and the server reads it whole at start.
const (
	MaxJAASBytes    = 1 << 20
	MaxUserName     = 256
	MaxUserPassword = 1024
)

// ParseJAAS reads a JAAS configuration file and returns the users of its
// section (ZooKeeper's server reads "Server"), user name to password. Every
// login module of that section must be DigestLoginModule (Kerberos' is not
// supported), and the section must name at least one user with a
// password. A user named twice is refused (Java would keep the last).
// Property references (${...}) are not expanded: a value holding one is
// refused.
func ParseJAAS(data []byte, section string) (map[string]string, error) {
	if len(data) > MaxJAASBytes {
		return nil, fmt.Errorf("%w: the file is over %d bytes", ErrJAAS, MaxJAASBytes)
	}
	p := jaasParser{lx: jaasLexer{b: data, line: 1}}
	if err := p.next(); err != nil {
		return nil, err
	}
	var users map[string]string
	seen := map[string]bool{}
	for p.tok.kind != tokEOF {
		name, entries, err := p.section()
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: section %q appears twice", ErrJAAS, name)
		}
		seen[name] = true
		if name == section {
			if users, err = usersOf(section, entries); err != nil {
				return nil, err
			}
		}
	}
	if users == nil {
		return nil, fmt.Errorf("%w: no %s section", ErrJAAS, section)
	}
	return users, nil
}

// loginEntry is one login module of a section.
type loginEntry struct {
	line    int
	module  string
	options []option
}

type option struct {
	line       int
	key, value string
}

// usersOf takes the users of a section's entries.
func usersOf(section string, entries []loginEntry) (map[string]string, error) {
	users := map[string]string{}
	for _, e := range entries {
		if e.module != DigestLoginModule {
			return nil, fmt.Errorf("%w: line %d: the %s section's login module is not %s: only DIGEST-MD5 users are supported (no Kerberos)",
				ErrJAAS, e.line, section, DigestLoginModule)
		}
		for _, o := range e.options {
			user, ok := strings.CutPrefix(o.key, "user_")
			switch {
			case !ok:
				continue
			case user == "":
				return nil, fmt.Errorf("%w: line %d: an option user_ names no user", ErrJAAS, o.line)
			case len(user) > MaxUserName:
				return nil, fmt.Errorf("%w: line %d: a user name is over %d bytes", ErrJAAS, o.line, MaxUserName)
			case o.value == "":
				return nil, fmt.Errorf("%w: line %d: user %q has an empty password", ErrJAAS, o.line, user)
			case len(o.value) > MaxUserPassword:
				return nil, fmt.Errorf("%w: line %d: user %q has a password over %d bytes", ErrJAAS, o.line, user, MaxUserPassword)
			case strings.Contains(o.value, "${"):
				return nil, fmt.Errorf("%w: line %d: user %q's password holds ${...}, a property reference, which is not expanded here", ErrJAAS, o.line, user)
			}
			if _, dup := users[user]; dup {
				return nil, fmt.Errorf("%w: line %d: user %q is named twice", ErrJAAS, o.line, user)
			}
			users[user] = o.value
		}
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%w: the %s section names no user (user_NAME=\"password\")", ErrJAAS, section)
	}
	return users, nil
}

type jaasParser struct {
	lx  jaasLexer
	tok token
}

func (p *jaasParser) next() error {
	var err error
	p.tok, err = p.lx.next()
	return err
}

// expect reads a punctuation token c.
func (p *jaasParser) expect(c byte, after string) error {
	if p.tok.kind != tokPunct || p.tok.text != string(c) {
		return fmt.Errorf("%w: line %d: %q expected %s", ErrJAAS, p.tok.line, c, after)
	}
	return p.next()
}

// word reads a word or a quoted string.
func (p *jaasParser) word(what string) (string, int, error) {
	if p.tok.kind != tokWord && p.tok.kind != tokQuoted {
		return "", 0, fmt.Errorf("%w: line %d: %s expected", ErrJAAS, p.tok.line, what)
	}
	s, line := p.tok.text, p.tok.line
	return s, line, p.next()
}

// section reads Name { entry... } ;
func (p *jaasParser) section() (string, []loginEntry, error) {
	name, _, err := p.word("a section name")
	if err != nil {
		return "", nil, err
	}
	if err := p.expect('{', "after a section name"); err != nil {
		return "", nil, err
	}
	var entries []loginEntry
	for p.tok.kind != tokPunct || p.tok.text != "}" {
		e, err := p.entry()
		if err != nil {
			return "", nil, err
		}
		entries = append(entries, e)
	}
	if err := p.next(); err != nil {
		return "", nil, err
	}
	if err := p.expect(';', "after a section's }"); err != nil {
		return "", nil, err
	}
	return name, entries, nil
}

// entry reads ModuleClass Flag key=value... ;
func (p *jaasParser) entry() (loginEntry, error) {
	var e loginEntry
	var err error
	if e.module, e.line, err = p.word("a login module's class"); err != nil {
		return e, err
	}
	flag, line, err := p.word("a control flag (required, requisite, sufficient or optional)")
	if err != nil {
		return e, err
	}
	switch strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return e, fmt.Errorf("%w: line %d: the control flag is not required, requisite, sufficient or optional", ErrJAAS, line)
	}
	for p.tok.kind != tokPunct || p.tok.text != ";" {
		var o option
		if o.key, o.line, err = p.word("an option key or ;"); err != nil {
			return e, err
		}
		if err := p.expect('=', "after an option key"); err != nil {
			return e, err
		}
		if o.value, _, err = p.word("an option value"); err != nil {
			return e, err
		}
		e.options = append(e.options, o)
	}
	return e, p.next()
}

// The lexer's tokens.
type tokenKind int

const (
	tokEOF    tokenKind = iota
	tokWord             // a run of letters, digits and . _ $ * -
	tokQuoted           // a double-quoted string, without its quotes
	tokPunct            // one of { } ; =
)

type token struct {
	kind tokenKind
	text string
	line int
}

type jaasLexer struct {
	b    []byte
	i    int
	line int
}

func (lx *jaasLexer) next() (token, error) {
	if err := lx.skip(); err != nil {
		return token{}, err
	}
	if lx.i == len(lx.b) {
		return token{kind: tokEOF, line: lx.line}, nil
	}
	c := lx.b[lx.i]
	switch {
	case c == '{' || c == '}' || c == ';' || c == '=':
		lx.i++
		return token{kind: tokPunct, text: string(c), line: lx.line}, nil
	case c == '"':
		return lx.quoted()
	case isJAASWordByte(c):
		start := lx.i
		for lx.i < len(lx.b) && isJAASWordByte(lx.b[lx.i]) {
			lx.i++
		}
		return token{kind: tokWord, text: string(lx.b[start:lx.i]), line: lx.line}, nil
	}
	return token{}, fmt.Errorf("%w: line %d: a character that begins no word, quoted string, comment or { } ; =", ErrJAAS, lx.line)
}

// skip skips white space and comments.
func (lx *jaasLexer) skip() error {
	for lx.i < len(lx.b) {
		c := lx.b[lx.i]
		switch {
		case c == '\n':
			lx.line++
			lx.i++
		case c <= ' ':
			lx.i++
		case c == '/' && lx.i+1 < len(lx.b) && lx.b[lx.i+1] == '/':
			for lx.i < len(lx.b) && lx.b[lx.i] != '\n' {
				lx.i++
			}
		case c == '/' && lx.i+1 < len(lx.b) && lx.b[lx.i+1] == '*':
			start := lx.line
			end := bytes.Index(lx.b[lx.i+2:], []byte("*/"))
			if end < 0 {
				return fmt.Errorf("%w: line %d: a /* comment is not closed", ErrJAAS, start)
			}
			comment := lx.b[lx.i : lx.i+2+end+2]
			lx.line += bytes.Count(comment, []byte("\n"))
			lx.i += len(comment)
		default:
			return nil
		}
	}
	return nil
}

// quoted reads a double-quoted string, which ends on its line, with the
// escapes of Java's StreamTokenizer (which Java's JAAS reader uses): \a,
// \b, \f, \n, \r, \t, \v, an octal character of up to three digits
// (\101 is A), and a backslash before any other character stands for it.
func (lx *jaasLexer) quoted() (token, error) {
	line := lx.line
	lx.i++ // the opening quote
	var sb strings.Builder
	for lx.i < len(lx.b) {
		c := lx.b[lx.i]
		lx.i++
		switch c {
		case '"':
			return token{kind: tokQuoted, text: sb.String(), line: line}, nil
		case '\n':
			return token{}, fmt.Errorf("%w: line %d: a quoted string is not closed on its line", ErrJAAS, line)
		case '\\':
			if lx.i == len(lx.b) || lx.b[lx.i] == '\n' {
				return token{}, fmt.Errorf("%w: line %d: a quoted string is not closed on its line", ErrJAAS, line)
			}
			c = lx.b[lx.i]
			lx.i++
			if '0' <= c && c <= '7' {
				// Up to three digits, three only when the first is at
				// most 3: a char of 0 to 255, as a Java string holds it.
				v, more := rune(c-'0'), 2
				if c > '3' {
					more = 1
				}
				for ; more > 0 && lx.i < len(lx.b) && '0' <= lx.b[lx.i] && lx.b[lx.i] <= '7'; more-- {
					v = v<<3 + rune(lx.b[lx.i]-'0')
					lx.i++
				}
				sb.WriteRune(v)
				continue
			}
			if e := strings.IndexByte("abfnrtv", c); e >= 0 {
				c = "\a\b\f\n\r\t\v"[e]
			}
		}
		sb.WriteByte(c)
	}
	return token{}, fmt.Errorf("%w: line %d: a quoted string is not closed", ErrJAAS, line)
}

// isJAASWordByte reports whether c may be part of a word: letters and
// digits, ". _ $ * -", and the bytes of non-ASCII characters.
func isJAASWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("._$*-", c) >= 0 || c >= 0x80
}
