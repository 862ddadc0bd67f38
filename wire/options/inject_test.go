package options

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestBugsMatchModule keeps Bugs equal to the table the module itself
// accepts: a name only one side knows is a crash mode the host accepts and
// the guest refuses with ENOENT after a kernel build and boot.
func TestBugsMatchModule(t *testing.T) {
	src, err := os.ReadFile("../../stress/kmod-target/bugs.c")
	if err != nil {
		t.Fatal(err)
	}
	var inC []string
	for _, m := range regexp.MustCompile(`\{ "([a-z-]+)", fth_bug_[a-z_]+ \}`).FindAllSubmatch(src, -1) {
		inC = append(inC, string(m[1]))
	}
	if len(inC) == 0 {
		t.Fatal("no { \"name\", fth_bug_fn } entries found in stress/kmod-target/bugs.c")
	}
	if !slices.Equal(inC, Bugs) {
		t.Errorf("bugs.c names %q, options.Bugs %q", inC, Bugs)
	}
}
