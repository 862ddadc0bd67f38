package matrix

import (
	"fmt"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
)

func TestZZScratch(t *testing.T) {
	tr, err := OpenTree("/var/cache/fth/src/linux-source-7.3", "/work/main/kconfigs")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arch.All() {
		for _, v := range Builtins() {
			c, err := Resolve(a, v, tr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%-28s %s\n", c.Name, c.Skip)
		}
	}
}
