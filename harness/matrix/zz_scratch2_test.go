package matrix

import (
	"fmt"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
)

func TestZZScratch2(t *testing.T) {
	tr, err := OpenTree("/var/cache/fth/src/linux-source-7.3", "/work/main/kconfigs")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arch.All() {
		kc, _ := tr.Arch(a)
		for _, v := range Builtins() {
			frags := append([]string{"base", a.Fragment()}, v.Fragments...)
			loaded, err := kbuild.LoadFragments(tr.KconfigDir, frags)
			if err != nil {
				t.Fatal(err)
			}
			settings := kbuild.Merge(loaded)
			for _, s := range settings {
				e := newEvaluator(kc, string(a.Name), settings, s.Symbol)
				switch s.Value {
				case "y", "m":
					if ok, why := e.possible(s.Symbol); !ok {
						fmt.Printf("%s %s: %s impossible: %s\n", a.Name, v.Name, s.Symbol, why)
					}
				case "n":
					if on, why := e.forcedOn(s.Symbol); on {
						fmt.Printf("%s %s: %s forced: %s\n", a.Name, v.Name, s.Symbol, why)
					}
				}
			}
		}
	}
}
