package matrix

import (
	"strings"
)

// tri is a Kconfig truth value as far as the harness can know it before
// configuring: kconfig's own macros ($(cc-option,...), $(success,...)) and
// prompts nobody set can go either way, and "maybe" never causes a skip.
type tri int8

const (
	no tri = iota
	maybe
	yes
)

func and3(a, b tri) tri { return min(a, b) }
func or3(a, b tri) tri  { return max(a, b) }
func not3(a tri) tri    { return yes - a }

func (t tri) String() string { return [...]string{"n", "maybe", "y"}[t] }

// node is a parsed Kconfig expression.
type node struct {
	// op is "sym", "const", "str", "macro", "!", "&&", "||", or a comparison
	// operator ("=", "!=", "<", "<=", ">", ">=").
	op   string
	text string
	kids []*node
}

// String prints the expression back in Kconfig syntax, for reasons.
func (n *node) String() string {
	switch n.op {
	case "!":
		k := n.kids[0].String()
		if n.kids[0].op == "&&" || n.kids[0].op == "||" {
			k = "(" + k + ")"
		}
		return "!" + k
	case "&&", "||":
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			parts[i] = k.String()
			if n.op == "&&" && k.op == "||" {
				parts[i] = "(" + parts[i] + ")"
			}
		}
		return strings.Join(parts, " "+n.op+" ")
	case "sym", "const", "str", "macro":
		return n.text
	}
	return n.kids[0].String() + " " + n.op + " " + n.kids[1].String()
}

// parseExpr parses a Kconfig expression. Anything it cannot parse becomes a
// single "macro" node, which evaluates to maybe: an unparsed expression must
// never produce a skip.
func parseExpr(s string) *node {
	p := &exprParser{toks: tokenize(s)}
	n := p.or()
	if n == nil || p.pos != len(p.toks) {
		return &node{op: "macro", text: s}
	}
	return n
}

type exprParser struct {
	toks []string
	pos  int
}

func (p *exprParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *exprParser) or() *node {
	return p.chain("||", p.and)
}

func (p *exprParser) and() *node {
	return p.chain("&&", p.unary)
}

func (p *exprParser) chain(op string, next func() *node) *node {
	first := next()
	if first == nil {
		return nil
	}
	n := &node{op: op, kids: []*node{first}}
	for p.peek() == op {
		p.pos++
		k := next()
		if k == nil {
			return nil
		}
		n.kids = append(n.kids, k)
	}
	if len(n.kids) == 1 {
		return first
	}
	return n
}

func (p *exprParser) unary() *node {
	if p.peek() == "!" {
		p.pos++
		k := p.unary()
		if k == nil {
			return nil
		}
		return &node{op: "!", kids: []*node{k}}
	}
	left := p.primary()
	if left == nil {
		return nil
	}
	switch op := p.peek(); op {
	case "=", "!=", "<", "<=", ">", ">=":
		p.pos++
		right := p.primary()
		if right == nil {
			return nil
		}
		return &node{op: op, kids: []*node{left, right}}
	}
	return left
}

func (p *exprParser) primary() *node {
	t := p.peek()
	switch {
	case t == "(":
		p.pos++
		n := p.or()
		if n == nil || p.peek() != ")" {
			return nil
		}
		p.pos++
		return n
	case t == "" || t == ")" || t == "&&" || t == "||" || t == "!":
		return nil
	case strings.HasPrefix(t, "$("):
		p.pos++
		return &node{op: "macro", text: t}
	case t[0] == '"' || t[0] == '\'':
		p.pos++
		return &node{op: "str", text: t}
	case t == "y" || t == "n" || t == "m":
		p.pos++
		return &node{op: "const", text: t}
	}
	switch t {
	case "=", "!=", "<", "<=", ">", ">=":
		return nil
	}
	p.pos++
	return &node{op: "sym", text: t}
}

// tokenize splits a Kconfig expression into operators, parentheses, quoted
// strings, $(...) macros and words.
func tokenize(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case strings.HasPrefix(s[i:], "&&"), strings.HasPrefix(s[i:], "||"),
			strings.HasPrefix(s[i:], "!="), strings.HasPrefix(s[i:], "<="), strings.HasPrefix(s[i:], ">="):
			toks = append(toks, s[i:i+2])
			i += 2
		case c == '(' || c == ')' || c == '!' || c == '=' || c == '<' || c == '>':
			toks = append(toks, s[i:i+1])
			i++
		case strings.HasPrefix(s[i:], "$("):
			j, depth := i+2, 1
			for ; j < len(s) && depth > 0; j++ {
				switch s[j] {
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			toks = append(toks, s[i:j])
			i = j
		case c == '"' || c == '\'':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			toks = append(toks, s[i:min(j+1, len(s))])
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t()!=<>&|\"'", rune(s[j])) {
				j++
			}
			if j == i {
				// A lone & or |: not Kconfig. Keep it so the parse fails.
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks
}
