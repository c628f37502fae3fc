package keepalived_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dplb/dplb/conf/keepalived"
)

// dump writes statements as "file:line word word { ... }", quoting words
// with spaces.
func dump(nodes []*keepalived.Node) string {
	var parts []string
	for _, n := range nodes {
		var words []string
		for _, w := range n.Words {
			if w == "" || strings.ContainsAny(w, " {}") {
				w = strconv.Quote(w)
			}
			words = append(words, w)
		}
		s := n.Pos.String() + " " + strings.Join(words, " ")
		if n.HasBlock {
			s += " { " + dump(n.Block) + " }"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// files writes name: text files into a new directory and returns it.
func files(t *testing.T, fs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range fs {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"braces on the same line and the next", "a 1 {\n  b 2\n}\nc\n{\n  d\n  {\n  }\n}\n",
			"k.conf:1 a 1 { k.conf:2 b 2 }; k.conf:4 c { k.conf:6 d {  } }"},
		{"comments of both kinds, anywhere", "# a comment\na 1 # after\n! another\nb 2 ! after\nc x#y\n",
			"k.conf:2 a 1; k.conf:4 b 2; k.conf:5 c x"},
		{"quotes keep spaces, braces and comment characters", `a "x y" "{#!}" b` + "\n",
			`k.conf:1 a "x y" "{#!}" b`},
		{"escaped comment characters and continued lines", "a x\\#y \\\n  z\nb\n",
			"k.conf:1 a x#y z; k.conf:3 b"},
		{"braces touching words, words after a closing brace", "a{b 1}c 2\nd {}\n",
			"k.conf:1 a { k.conf:1 b 1 }; k.conf:1 c 2; k.conf:2 d {  }"},
		{"empty", "\n  \n# nothing\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := keepalived.Parse("k.conf", []byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(nodes); got != tt.want {
				t.Errorf("Parse() = %s\nwant      %s", got, tt.want)
			}
		})
	}
}

// TestParseInclude: include takes globs relative to the including file's
// directory, in name order; a glob that matches nothing adds nothing.
func TestParseInclude(t *testing.T) {
	dir := files(t, map[string]string{
		"keepalived.conf":   "a\ninclude conf.d/*.conf\ninclude none.d/*.conf\nvirtual_server {\n  include rs.inc\n}\n",
		"conf.d/2.conf":     "c\n",
		"conf.d/1.conf":     "include ../b.inc\n",
		"conf.d/rs.inc":     "r\n",
		"b.inc":             "b\n",
		"conf.d/skip.other": "x\n",
		"rs.inc":            "real_server 1\n",
	})
	nodes, err := keepalived.ParseFile(filepath.Join(dir, "keepalived.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("D/", dir+"/").Replace(
		"D/keepalived.conf:1 a; D/b.inc:1 b; D/conf.d/2.conf:1 c; D/keepalived.conf:4 virtual_server { D/rs.inc:1 real_server 1 }")
	if got := dump(nodes); got != want {
		t.Errorf("ParseFile() = %s\nwant          %s", got, want)
	}
}

// TestParseErrors: what keepalived.conf's grammar refuses is an error
// naming the file and line.
func TestParseErrors(t *testing.T) {
	dir := files(t, map[string]string{
		"a.conf":    "x\ninclude b.conf\n",
		"b.conf":    "\ninclude a.conf\n",
		"sub/.keep": "",
	})
	tests := []struct {
		name, text, want string
	}{
		{"unclosed block", "virtual_server 192.0.2.10 80 {\n  real_server 198.51.100.11 80 {\n  }\n",
			"k.conf:1: the block of virtual_server is not closed (a '}' is missing)"},
		{"extra closing brace", "a {\n}\n}\n",
			"k.conf:3: '}' closes no block"},
		{"block without a keyword", "{\n}\n",
			"k.conf:1: '{' with no keyword before it"},
		{"second block", "a {\n}\n{\n}\n",
			"k.conf:3: '{' with no keyword before it"},
		{"unterminated quote", "a\nmisc_path \"/bin/check\n",
			"k.conf:2: unterminated quote"},
		{"include cycle", "include " + dir + "/a.conf\n",
			dir + "/b.conf:2: include cycle: " + dir + "/a.conf -> " + dir + "/b.conf -> " + dir + "/a.conf"},
		{"missing include", "a\ninclude " + dir + "/missing.conf\n",
			"k.conf:2: include: open " + dir + "/missing.conf: no such file or directory"},
		{"unreadable include", "include " + dir + "/sub\n",
			"k.conf:1: include: read " + dir + "/sub: is a directory"},
		{"include without a file", "include\n",
			"k.conf:1: include wants one file name or pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := keepalived.Parse("k.conf", []byte(tt.text))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() = %v\nwant       %s", err, tt.want)
			}
		})
	}
}
