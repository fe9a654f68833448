package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/cli.md is rendered from the commands; flags change, the file must follow.
func TestCLIReferenceIsCurrent(t *testing.T) {
	want, err := cliReference()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", CLIReferenceFile)) // the module root's
	if err != nil {
		t.Fatalf("%v: run `go run . docs cli` to create it", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Fatalf("%s is stale: run `go run . docs cli` (or `task docs`) to update it.\nfirst difference at line %d:\n  file:      %s\n  generated: %s",
			CLIReferenceFile, i+1, line(gl), line(wl))
	}
	for _, c := range newApp().Commands {
		if !c.Hidden && c.Name != "help" && !strings.Contains(string(want), "\n## hookledger "+c.Name+"\n") {
			t.Errorf("%s has no section for %q", CLIReferenceFile, c.Name)
		}
	}
}

// The README's commands table names every command (and every subcommand
// of one it lists), so a new command cannot be left out of it.
func TestREADMEListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "| `") {
			table = append(table, strings.SplitN(l, "|", 3)[1])
		}
	}
	rows := strings.Join(table, "\n")
	for _, c := range newApp().Commands {
		if c.Hidden || c.Name == "help" || c.Name == "docs" {
			continue
		}
		if !strings.Contains(rows, "`"+c.Name) {
			t.Errorf("README.md's commands table lacks %q", c.Name)
			continue
		}
		for _, sub := range c.Subcommands {
			if !sub.Hidden && !strings.Contains(rows, "`"+sub.Name+"`") && !strings.Contains(rows, "`"+c.Name+" "+sub.Name) {
				t.Errorf("README.md's commands table lacks %q %q", c.Name, sub.Name)
			}
		}
	}
}
