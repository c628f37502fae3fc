package keepalived

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Pos is where a keyword was written: a file and a line in it.
type Pos struct {
	File string
	Line int
	seq  int // the line's rank in reading order, across includes
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// Node is one statement of keepalived.conf: a keyword, its values, and the
// block that follows it, if any.
type Node struct {
	Pos      Pos
	Words    []string // the keyword, then its values, quotes removed
	Block    []*Node  // the statements of its block
	HasBlock bool     // it has a block, perhaps an empty one
}

// Keyword is the statement's first word.
func (n *Node) Keyword() string { return n.Words[0] }

// Args are the words after the keyword.
func (n *Node) Args() []string { return n.Words[1:] }

// Error is a file keepalived.conf names that cannot be read, or text that
// is not keepalived's grammar; Pos says where.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// maxIncludeDepth stops includes that a cycle check cannot see (the same
// file through different links).
const maxIncludeDepth = 32

// includes are include and its variants, which differ only in which
// failures keepalived reports.
var includes = []string{"include", "includer", "includem", "includew", "includeb", "includea"}

// token is a word or a brace ("{", "}" unquoted) and where it was read.
type token struct {
	text  string
	brace bool
	pos   Pos
}

// lexer reads files into tokens, following includes.
type lexer struct {
	toks  []token
	lines int      // lines read so far, for Pos.seq
	stack []string // absolute paths of the files being read, outermost first
}

// ParseFile reads a keepalived.conf and the files it includes into
// statements. include takes a glob, relative to the including file's
// directory; a pattern that matches nothing is skipped, as keepalived does,
// but a plain path must name a readable file.
func ParseFile(path string) ([]*Node, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse reads keepalived.conf text; name is its file's name, for positions
// and includes.
func Parse(name string, data []byte) ([]*Node, error) {
	l := &lexer{}
	if err := l.file(name, data); err != nil {
		return nil, err
	}
	p := &parser{toks: l.toks}
	return p.block(nil)
}

func (l *lexer) file(name string, data []byte) error {
	abs, err := filepath.Abs(name)
	if err != nil {
		abs = filepath.Clean(name)
	}
	l.stack = append(l.stack, abs)
	defer func() { l.stack = l.stack[:len(l.stack)-1] }()

	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l.lines++
		pos := Pos{File: name, Line: i + 1, seq: l.lines}
		text, cont, err := decomment(lines[i])
		// A line ending in "\" goes on on the next one.
		for cont && err == nil && i+1 < len(lines) {
			i++
			var more string
			more, cont, err = decomment(lines[i])
			text += " " + more
		}
		if err != nil {
			return &Error{Pos: pos, Msg: err.Error()}
		}
		words, err := split(text, pos)
		if err != nil {
			return err
		}
		if len(words) > 0 && !words[0].brace && slices.Contains(includes, words[0].text) {
			if err := l.include(name, pos, words[1:]); err != nil {
				return err
			}
			continue
		}
		l.toks = append(l.toks, words...)
	}
	return nil
}

// include reads the files an include statement names.
func (l *lexer) include(from string, pos Pos, args []token) error {
	if len(args) != 1 || args[0].brace {
		return &Error{Pos: pos, Msg: "include wants one file name or pattern"}
	}
	pattern := args[0].text
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(filepath.Dir(from), pattern)
	}
	files := []string{pattern}
	if strings.ContainsAny(pattern, "*?[") {
		var err error
		if files, err = filepath.Glob(pattern); err != nil {
			return &Error{Pos: pos, Msg: fmt.Sprintf("include %s: %v", args[0].text, err)}
		}
	}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			abs = filepath.Clean(f)
		}
		for i, open := range l.stack {
			if open == abs {
				chain := append(append([]string{}, l.stack[i:]...), abs)
				return &Error{Pos: pos, Msg: "include cycle: " + strings.Join(chain, " -> ")}
			}
		}
		if len(l.stack) >= maxIncludeDepth {
			return &Error{Pos: pos, Msg: fmt.Sprintf("include %s: more than %d files deep", f, maxIncludeDepth)}
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return &Error{Pos: pos, Msg: "include: " + err.Error()}
		}
		if err := l.file(f, data); err != nil {
			return err
		}
	}
	return nil
}

// decomment removes a comment ("#" or "!" outside double quotes, to the
// end of the line) and says whether the line ends in "\" (goes on on the
// next one). "\#" and "\!" outside quotes are the characters themselves.
func decomment(line string) (string, bool, error) {
	var b strings.Builder
	quote := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			quote = !quote
		case c == '\\' && i+1 == len(line):
			return b.String(), true, nil
		case c == '\\' && !quote && (line[i+1] == '#' || line[i+1] == '!'):
			i++
			c = line[i]
		case c == '\\':
			b.WriteByte(c)
			i++
			c = line[i]
		case !quote && (c == '#' || c == '!'):
			return b.String(), false, nil
		}
		b.WriteByte(c)
	}
	if quote {
		return "", false, fmt.Errorf("unterminated quote")
	}
	return b.String(), false, nil
}

// split cuts a line into words and braces. A double-quoted string is one
// word without its quotes; braces outside quotes stand alone, whatever
// touches them.
func split(line string, pos Pos) ([]token, error) {
	var out []token
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r':
			i++
		case c == '{' || c == '}':
			out = append(out, token{text: string(c), brace: true, pos: pos})
			i++
		case c == '"':
			end := strings.IndexByte(line[i+1:], '"')
			if end < 0 {
				return nil, &Error{Pos: pos, Msg: "unterminated quote"}
			}
			out = append(out, token{text: line[i+1 : i+1+end], pos: pos})
			i += end + 2
		default:
			j := i
			for j < len(line) && !strings.ContainsRune(" \t\f\v\r\"{}", rune(line[j])) {
				j++
			}
			out = append(out, token{text: line[i:j], pos: pos})
			i = j
		}
	}
	return out, nil
}

// parser builds statements from tokens: the words of a line are one
// statement, and a block ("{" on the same line or the next) belongs to the
// statement before it.
type parser struct {
	toks []token
	i    int
}

// block reads statements up to the "}" that closes open, or to the end
// when open is nil.
func (p *parser) block(open *Node) ([]*Node, error) {
	var out []*Node
	var cur *Node // the statement of the line being read
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		p.i++
		switch {
		case t.brace && t.text == "{":
			owner := cur
			if owner == nil && len(out) > 0 && !out[len(out)-1].HasBlock {
				owner = out[len(out)-1]
			}
			if owner == nil || owner.HasBlock {
				return nil, &Error{Pos: t.pos, Msg: "'{' with no keyword before it"}
			}
			owner.HasBlock = true
			body, err := p.block(owner)
			if err != nil {
				return nil, err
			}
			owner.Block = body
			cur = nil // words after the "}" start a statement
		case t.brace:
			if open == nil {
				return nil, &Error{Pos: t.pos, Msg: "'}' closes no block"}
			}
			return out, nil
		default:
			if cur == nil || cur.Pos.seq != t.pos.seq || cur.HasBlock {
				cur = &Node{Pos: t.pos}
				out = append(out, cur)
			}
			cur.Words = append(cur.Words, t.text)
		}
	}
	if open != nil {
		return nil, &Error{Pos: open.Pos, Msg: fmt.Sprintf("the block of %s is not closed (a '}' is missing)", open.Keyword())}
	}
	return out, nil
}
