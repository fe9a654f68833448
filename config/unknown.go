package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
	"github.com/xrash/smetrics"
)

// unknownField turns the YAML library's "[4:5] unknown field" into this
// package's form, line and path, and names the key it most likely meant:
//
//	4: providers[0].secret: unknown field (did you mean "secrets"?)
func unknownField(body ast.Node, e *yaml.UnknownFieldError) error {
	name := strings.Trim(e.Token.Value, `"'`)
	line := e.Token.Position.Line
	path, ok := keyPath(body, e.Token, nil)
	if !ok {
		return fmt.Errorf("%d: unknown field %q", line, name)
	}
	key := strings.TrimPrefix(strings.Join(path, "")+"."+name, ".")
	msg := fmt.Sprintf("%d: %s: unknown field", line, key)
	if s := closest(name, fieldNames(typeAt(reflect.TypeFor[Config](), path))); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return fmt.Errorf("%s", msg)
}

// keyPath is the path (".providers", "[0]", …) of the mapping whose key is
// tk, under n.
func keyPath(n ast.Node, tk *token.Token, path []string) ([]string, bool) {
	switch n := n.(type) {
	case *ast.MappingNode:
		for _, v := range n.Values {
			if p, ok := keyPath(v, tk, path); ok {
				return p, true
			}
		}
	case *ast.MappingValueNode:
		if n.Key.GetToken() == tk {
			return path, true
		}
		return keyPath(n.Value, tk, append(path, "."+n.Key.GetToken().Value))
	case *ast.SequenceNode:
		for i, v := range n.Values {
			if p, ok := keyPath(v, tk, append(path, "["+strconv.Itoa(i)+"]")); ok {
				return p, true
			}
		}
	}
	return nil, false
}

// typeAt is the type the YAML at path decodes into, starting from t; nil
// when the path leaves the structs.
func typeAt(t reflect.Type, path []string) reflect.Type {
	for _, seg := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case strings.HasPrefix(seg, "["):
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := fieldNamed(t, strings.TrimPrefix(seg, "."))
			if !ok {
				return nil
			}
			t = f.Type
		default:
			return nil
		}
	}
	return t
}

// fieldNames are the YAML keys of struct type t.
func fieldNames(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func fieldNamed(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if yamlName(t.Field(i)) == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// closest is the candidate within two edits of name (the fewest), if any.
func closest(name string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := smetrics.WagnerFischer(name, c, 1, 1, 1); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}
