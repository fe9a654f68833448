package walkthrough_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// TestMain runs the tests from the module root, where a reader's checkout
// has README.md, docs/, examples/ and .gitignore (the walkthroughs read the
// first three and check what a page leaves behind against the last), then
// builds the binary once for them and removes it after.
func TestMain(m *testing.M) {
	root, err := testenv.ModuleRoot()
	if err == nil {
		err = os.Chdir(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "walkthrough:", err)
		os.Exit(1)
	}
	testenv.Main(m)
}
