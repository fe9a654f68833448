package replication

// Reading litestream.yml strictly. Litestream's own parser ignores keys it
// does not know; here the tree is walked against the raw types first, so a
// misspelt key is an error naming its line, and the values are decoded after.

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// parseConfig reads the first YAML document, as Litestream does; the parser
// already rejects a key defined twice in one mapping.
func parseConfig(buf []byte) (*Config, error) {
	file, err := parser.ParseBytes(buf, 0)
	if err != nil {
		return nil, yamlError(err, nil)
	} else if len(file.Docs) == 0 || file.Docs[0].Body == nil {
		return nil, errors.New("empty config: a dbs entry with a replica is required")
	}
	body := file.Docs[0].Body
	c, raw := &Config{line: map[string]int{}}, rawConfig{}
	k := keyChecker{lines: c.line, keys: map[*token.Token]string{}, anchors: map[string]ast.Node{}}
	if err := k.check(body, reflect.TypeOf(raw), ""); err != nil {
		return nil, err
	} else if err := decode(body, &raw, k.keys); err != nil {
		return nil, err
	}
	return c, c.build(&raw)
}

// decode maps the checked tree onto raw; keys names the key of each value
// for type errors. The YAML library can panic on some malformed input
// (config.FuzzParse found a custom tag on a sequence), so a panic becomes an
// ordinary config error rather than a crash at startup.
func decode(body ast.Node, raw *rawConfig, keys map[*token.Token]string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("line %d: cannot decode this YAML (%v)", lineOf(body), r)
		}
	}()
	return yamlError(yaml.NodeToValue(body, raw), keys)
}

// yamlError words a parser or decoder error like the validation errors:
// "line N: message", and "line N: key: want …, got …" for a value of the
// wrong type: the library's own type message names Go types and the field of
// the outermost struct (rawConfig.DBs for a replica's bool), which would mislead.
func yamlError(err error, keys map[*token.Token]string) error {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		return err
	}
	line := ye.GetToken().Position.Line
	var te *yaml.TypeError
	if errors.As(err, &te) && te.SrcType != nil && te.DstType != nil {
		want, got := te.DstType.String(), fmt.Sprintf("%q", te.Token.Value)
		switch te.DstType.Kind() {
		case reflect.Bool:
			want = "true or false"
		case reflect.String:
			want = "a string"
		}
		switch te.SrcType.Kind() {
		case reflect.Slice:
			got = "a sequence"
		case reflect.Map:
			got = "a mapping"
		}
		if key := keys[te.Token]; key != "" {
			return fmt.Errorf("line %d: %s: want %s, got %s", line, key, want, got)
		}
		return fmt.Errorf("line %d: want %s, got %s", line, want, got)
	}
	return fmt.Errorf("line %d: %s", line, ye.GetMessage())
}

// keyChecker walks the YAML tree against the yaml tags of the raw types and
// rejects any key they do not declare, recording each key's line for the
// validation errors. Type errors are left to decode, which reports them with
// their line.
type keyChecker struct {
	lines   map[string]int          // "dbs[0].replica.type" → line
	keys    map[*token.Token]string // a value's first token → "dbs[0].replica.type"
	anchors map[string]ast.Node     // anchors seen so far, in document order as aliases see them
}

func (k *keyChecker) check(n ast.Node, t reflect.Type, where string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n = k.resolve(n); n == nil {
		return nil
	} else if where != "" {
		k.keys[n.GetToken()] = where
	}
	switch n := n.(type) {
	case *ast.SequenceNode:
		if t.Kind() != reflect.Slice {
			return nil
		}
		for i, item := range n.Values {
			at := fmt.Sprintf("%s[%d]", where, i)
			k.lines[at] = lineOf(item)
			if err := k.check(item, t.Elem(), at); err != nil {
				return err
			}
		}
	case ast.MapNode:
		if t.Kind() != reflect.Struct {
			return nil
		}
		for it := n.MapRange(); it.Next(); {
			key := keyText(it.Key())
			at := strings.TrimPrefix(where+"."+key, ".")
			field, ok := fieldByTag(t, key)
			if in := cmp.Or(where, "the top level"); !ok {
				return fmt.Errorf("line %d: unknown key %q in %s", lineOf(it.Key()), key, in)
			}
			k.lines[at] = lineOf(it.Key())
			if err := k.check(it.Value(), field.Type, at); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolve strips tags and anchors (remembering the anchors) and follows an
// alias to the node it names, so an aliased mapping is checked at the place
// it is used, against the type expected there. An alias to no anchor seen
// yet resolves to itself and is left for decode to report.
func (k *keyChecker) resolve(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			k.anchors[v.Name.GetToken().Value] = v.Value
			n = v.Value
		case *ast.AliasNode:
			target, ok := k.anchors[v.Value.GetToken().Value]
			if !ok {
				return n
			}
			n = target
		default:
			return n
		}
	}
}

// unwrap strips the tags and anchors decode hands a custom unmarshaler.
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			n = v.Value
		default:
			return n
		}
	}
}

// keyText is a mapping key as written, unquoted; a merge key ("<<") or a
// complex key is never a key hookledger declares, so it is reported as unknown.
func keyText(key ast.MapKeyNode) string {
	if s, ok := unwrap(key).(*ast.StringNode); ok {
		return s.Value
	}
	return key.GetToken().Value
}

func lineOf(n ast.Node) int {
	if n == nil || n.GetToken() == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
