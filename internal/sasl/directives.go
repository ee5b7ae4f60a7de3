package sasl

import (
	"fmt"
	"strings"
)

// A DIGEST-MD5 token is a list of directives, name=value separated by
// commas, as HTTP's authentication parameters are written (RFC 2831,
// 7.1): a value is a token or a quoted string, in which a backslash
// makes the next byte literal; spaces may go around the commas and the
// equals sign, and an empty element (",,") is allowed.

// MaxResponse bounds a client's token: RFC 2831 (2.1.2) keeps a
// digest-response under 4096 bytes, and Java's server refuses a longer
// one.
const MaxResponse = 4096

// maxDirectives bounds the directives of one token, known or not: a
// digest-response has ten kinds, each at most once.
const maxDirectives = 32

// parseDirectives reads the directives of b into a map by name, in lower
// case (names are case-insensitive; values are not). A directive named
// twice, a list over maxDirectives, and anything that does not follow the
// grammar fail with an error that wraps ErrMalformed and quotes none of
// b's values.
func parseDirectives(b []byte) (map[string]string, error) {
	if len(b) > MaxResponse {
		return nil, fmt.Errorf("%w: a token of %d bytes is over the limit of %d", ErrMalformed, len(b), MaxResponse)
	}
	p := directiveParser{b: b}
	out := map[string]string{}
	for {
		p.skipSpace()
		if p.i == len(p.b) {
			return out, nil
		}
		if p.b[p.i] == ',' {
			p.i++
			continue
		}
		name, err := p.token("a directive's name")
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i == len(p.b) || p.b[p.i] != '=' {
			return nil, fmt.Errorf("%w: directive %q has no value", ErrMalformed, name)
		}
		p.i++
		p.skipSpace()
		var value string
		if p.i < len(p.b) && p.b[p.i] == '"' {
			value, err = p.quoted(name)
		} else {
			value, err = p.token("the value of " + name)
		}
		if err != nil {
			return nil, err
		}
		name = strings.ToLower(name)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: directive %q appears twice", ErrMalformed, name)
		}
		if len(out) == maxDirectives {
			return nil, fmt.Errorf("%w: more than %d directives", ErrMalformed, maxDirectives)
		}
		out[name] = value
		p.skipSpace()
		if p.i < len(p.b) && p.b[p.i] != ',' {
			return nil, fmt.Errorf("%w: no comma after directive %q", ErrMalformed, name)
		}
	}
}

type directiveParser struct {
	b []byte
	i int
}

// skipSpace skips linear white space: spaces, tabs, CR and LF.
func (p *directiveParser) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

// token reads a token: one or more bytes that are neither control
// characters nor separators (RFC 2616, 2.2).
func (p *directiveParser) token(what string) (string, error) {
	start := p.i
	for p.i < len(p.b) && isTokenByte(p.b[p.i]) {
		p.i++
	}
	if p.i == start {
		return "", fmt.Errorf("%w: %s is missing or not a token", ErrMalformed, what)
	}
	return string(p.b[start:p.i]), nil
}

// quoted reads a quoted string, the opening quote at p.i, without its
// quotes and backslashes. Control characters other than a tab are refused
// in it.
func (p *directiveParser) quoted(name string) (string, error) {
	p.i++ // the opening quote
	var sb strings.Builder
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch {
		case c == '"':
			return sb.String(), nil
		case c == '\\':
			if p.i == len(p.b) {
				return "", fmt.Errorf("%w: the value of %q ends in a backslash", ErrMalformed, name)
			}
			c = p.b[p.i]
			p.i++
		}
		if c < 0x20 && c != '\t' || c == 0x7f {
			return "", fmt.Errorf("%w: the value of %q holds a control character", ErrMalformed, name)
		}
		sb.WriteByte(c)
	}
	return "", fmt.Errorf("%w: the value of %q has no closing quote", ErrMalformed, name)
}

// isTokenByte reports whether c may be part of a token: a printable ASCII
// character but the separators ()<>@,;:\"/[]?={}, or any byte of a
// non-ASCII character (RFC 2831 takes UTF-8 in tokens' stead).
func isTokenByte(c byte) bool {
	if c <= ' ' || c == 0x7f {
		return false
	}
	return !strings.ContainsRune(`()<>@,;:\"/[]?={}`, rune(c))
}

// appendQuoted appends s as a quoted string.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
