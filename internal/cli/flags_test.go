package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// urfave/cli takes the first back-quoted word of a flag's usage as its
// placeholder (`--anchors FILE`), so back-quotes there are for an explicit
// placeholder only, and a flag shows one default: its DefaultText or its value.
func TestFlagHelp(t *testing.T) {
	placeholder := regexp.MustCompile("^[A-Z][A-Z_]*$")
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			name := path + " " + cmd.Name
			for _, f := range cmd.Flags {
				usage := f.(cli.DocGenerationFlag).GetUsage()
				if parts := strings.Split(usage, "`"); len(parts) > 1 && (len(parts) != 3 || !placeholder.MatchString(parts[1])) {
					t.Errorf("%s --%s: back-quotes around other than one placeholder name: %q", name, f.Names()[0], usage)
				}
				if s := f.String(); strings.Count(s, "(default:") > 1 {
					t.Errorf("%s --%s shows two defaults: %s", name, f.Names()[0], s)
				}
			}
			walk(name, cmd.Subcommands)
		}
	}
	walk("hookledger", newApp().Commands)
}
