package console

import "testing"

func TestNodeURLEscapesEachName(t *testing.T) {
	for path, want := range map[string]string{
		"/":          "/ui/tree/",
		"/app/x":     "/ui/tree/app/x",
		"/a/x?y":     "/ui/tree/a/x%3Fy",
		"/a/b#c":     "/ui/tree/a/b%23c",
		"/a/a%2Fb":   "/ui/tree/a/a%252Fb",
		"/a/with sp": "/ui/tree/a/with%20sp",
	} {
		if got := nodeURL(path); got != want {
			t.Errorf("nodeURL(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestOnlyDataATextBoxKeepsIsEditable(t *testing.T) {
	for data, want := range map[string]bool{
		"":                 true,
		"plain\ttext\nok":  true,
		`{"json": 1}`:      true,
		"crlf\r\n":         false,
		"nul\x00":          false,
		"\xff\xfe":         false,
		"del\x7f":          false,
		"héllo, wörld ✓\n": true,
	} {
		if got := editable([]byte(data)); got != want {
			t.Errorf("editable(%q) = %v, want %v", data, got, want)
		}
	}
}
