package kbuild

import (
	"os"
	"strings"
)

// inheritedEnv lists the only variables a kernel build inherits from the
// harness's environment. Everything else is dropped because kbuild reads the
// environment as make variables: `make test-arch=riscv64` once put
// ARCH=riscv64 into MAKEFLAGS, and the kernel's sub-make took it over fth's
// ARCH=riscv. CC, O, KBUILD_OUTPUT, KCONFIG_CONFIG, LLVM, CROSS_COMPILE, a
// jobserver's file descriptors and a user's KCFLAGS would each change or
// break the build behind the cache key's back.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TERM"}

// cleanEnv returns the inherited part of environ (os.Environ's form) plus a
// fixed locale, so that tool output the harness parses does not vary.
func cleanEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		for _, keep := range inheritedEnv {
			if k == keep {
				env = append(env, kv)
				break
			}
		}
	}
	return append(env, "LC_ALL=C")
}

// hostEnv is cleanEnv of this process's environment.
func hostEnv() []string { return cleanEnv(os.Environ()) }
