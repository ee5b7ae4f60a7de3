package sasl

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

var directiveTests = []struct {
	name string
	in   string
	want map[string]string // nil: malformed
}{
	{"tokens and quoted strings", `a=1,b="x y"`, map[string]string{"a": "1", "b": "x y"}},
	{"names are case-insensitive, values are not", `QoP=Auth`, map[string]string{"qop": "Auth"}},
	{"spaces around the separators", " a = 1 ,\tb=\"2\" , ", map[string]string{"a": "1", "b": "2"}},
	{"empty elements", `,,a=1,,,b=2,`, map[string]string{"a": "1", "b": "2"}},
	{"a backslash makes the next byte literal", `a="x\"y\\z\q"`, map[string]string{"a": `x"y\zq`}},
	{"commas and equals signs in a quoted value", `a="b=c,d"`, map[string]string{"a": "b=c,d"}},
	{"an empty quoted value", `a=""`, map[string]string{"a": ""}},
	{"UTF-8 in a quoted value", `username="jörg"`, map[string]string{"username": "jörg"}},
	{"nothing at all", ``, map[string]string{}},
	{"a directive named twice", `a=1,A=2`, nil},
	{"a name without a value", `a`, nil},
	{"a name with an empty value", `a=`, nil},
	{"a value without a name", `=1`, nil},
	{"two values without a comma", `a=1 b=2`, nil},
	{"a quoted value without its end", `a="1`, nil},
	{"a quoted value ending in a backslash", `a="1\`, nil},
	{"a separator in a token value", `a=x/y`, nil},
	{"a control character in a quoted value", "a=\"x\x00y\"", nil},
	{"a newline in a quoted value", "a=\"x\ny\"", nil},
	{"text after a quoted value", `a="x"y`, nil},
}

func TestParseDirectives(t *testing.T) {
	for _, tt := range directiveTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDirectives([]byte(tt.in))
			if tt.want == nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("got %q, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("at most 32 directives", func(t *testing.T) {
		var parts []string
		for i := range 33 {
			parts = append(parts, "d"+strings.Repeat("x", i)+"=1")
		}
		if _, err := parseDirectives([]byte(strings.Join(parts[:32], ","))); err != nil {
			t.Fatalf("32 directives: %v", err)
		}
		if _, err := parseDirectives([]byte(strings.Join(parts, ","))); !errors.Is(err, ErrMalformed) {
			t.Fatalf("33 directives: %v, want ErrMalformed", err)
		}
	})
}

func TestAppendQuotedIsReadBack(t *testing.T) {
	for _, s := range []string{"", "zk-sasl-md5", `a"b\c`, "x,y=z"} {
		got, err := parseDirectives(appendQuoted([]byte("v="), s))
		if err != nil || got["v"] != s {
			t.Errorf("%q read back as %q, %v", s, got["v"], err)
		}
	}
}
