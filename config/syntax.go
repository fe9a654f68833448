package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
)

// syntaxError words a YAML syntax error as the other configuration errors
// are: the line, the keys that lead there, and the line itself. The YAML
// library says only "[5:3] value is not allowed in this context".
func syntaxError(src []byte, err error) error {
	var se *yaml.SyntaxError
	if !errors.As(err, &se) || se.Token == nil || se.Token.Position == nil {
		return fmt.Errorf(" %s", yaml.FormatError(err, false, false))
	}
	n := se.Token.Position.Line
	lines := strings.Split(string(src), "\n")
	if n < 1 || n > len(lines) {
		return fmt.Errorf(" %s", yaml.FormatError(err, false, false))
	}
	where := ""
	if path := textKeyPath(lines, n); path != "" {
		where = path + ": "
	}
	return fmt.Errorf("%d: %s%s (not valid YAML)\n    %d | %s", n, where, se.Message, n, lines[n-1])
}

// textKeyPath is the path of keys that leads to line n (from 1), such as
// "providers[0].secrets", read from the indentation: a file that does not
// parse has no syntax tree to ask. Each less indented line above is a
// parent: a "key:" adds the key, a "- " item its index among its siblings.
func textKeyPath(lines []string, n int) string {
	var path []string
	limit := -1 // a parent is indented less than this; -1 for the line itself
	for i := n - 1; i >= 0; i-- {
		text := strings.TrimLeft(lines[i], " ")
		indent := len(lines[i]) - len(text)
		if text == "" || strings.HasPrefix(text, "#") || (limit >= 0 && indent >= limit) {
			continue
		}
		if item, ok := strings.CutPrefix(text, "- "); ok {
			// The item's first key leads here when it is the line itself or
			// when the line is inside that key's value (indented past the
			// item's other keys, which sit at indent+2).
			if k := lineKey(item); k != "" && (limit < 0 || limit > indent+2) {
				path = append(path, "."+k)
			}
			path = append(path, fmt.Sprintf("[%d]", siblingsBefore(lines, i, indent)))
		} else if k := lineKey(text); k != "" {
			path = append(path, "."+k)
		}
		limit = indent
		if indent == 0 {
			break
		}
	}
	slices.Reverse(path)
	return strings.TrimPrefix(strings.Join(path, ""), ".")
}

// lineKey is the key a "key: value" text starts with, or "".
func lineKey(text string) string {
	k, _, ok := strings.Cut(text, ":")
	if !ok || k == "" || strings.ContainsAny(k, " \"'[{#") {
		return ""
	}
	return k
}

// siblingsBefore counts the "- " items at indent above line i, up to their
// parent: the index of the item on line i.
func siblingsBefore(lines []string, i, indent int) int {
	count := 0
	for j := i - 1; j >= 0; j-- {
		text := strings.TrimLeft(lines[j], " ")
		in := len(lines[j]) - len(text)
		switch {
		case text == "" || strings.HasPrefix(text, "#") || in > indent:
		case in < indent || !strings.HasPrefix(text, "- "):
			return count
		default:
			count++
		}
	}
	return count
}
