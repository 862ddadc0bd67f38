// Command goprog is a fixture for the symbolize tests: it prints its own
// call stack as the Go runtime sees it, inlined frames included, so the
// test can check the DWARF symbolizer against the runtime's own tables.
package main

import (
	"fmt"
	"os"
	"runtime"
)

//go:noinline
func leaf() []uintptr {
	pcs := make([]uintptr, 16)
	return pcs[:runtime.Callers(1, pcs)]
}

// inner and middle are small enough to be inlined into outer, which gives
// the call to leaf a two-deep inline chain.
func inner() []uintptr { return leaf() }

func middle() []uintptr { return inner() }

//go:noinline
func outer() []uintptr {
	return middle()
}

func main() {
	// One line per frame: the address of the call, "inline" for a frame
	// inlined into the next one, the function and the position.
	frames := runtime.CallersFrames(outer())
	for {
		f, more := frames.Next()
		kind := "func"
		if f.Func == nil {
			kind = "inline"
		}
		fmt.Fprintf(os.Stdout, "%#x %s %s %s:%d\n", f.PC, kind, f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
}
