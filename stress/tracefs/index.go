package tracefs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

const fileAvailable = "available_filter_functions"

// FuncIndex names vmlinux's functions by their index in
// available_filter_functions, which set_ftrace_filter takes in place of a
// name. A name makes the kernel look every ftrace record up in kallsyms
// under ftrace_lock (match_records), and a module's symbols are searched
// one by one: with fth_scale.ko's 32,768 functions loaded, one name filter
// cost minutes under TCG and held RCU-tasks past its stall timeout. An
// index is a walk to one record (add_rec_by_index). vmlinux's records come
// first and stay put once boot has freed its init text (modules' are
// appended as they load and go as they unload), so the index only covers
// them; a module's function keeps its name.
type FuncIndex struct {
	byName map[string][]int
}

// ReadFuncIndex reads vmlinux's part of available_filter_functions under
// root (the top tracing directory), up to the first module's function.
func ReadFuncIndex(root string) (*FuncIndex, error) {
	f, err := os.Open(New(root).path(fileAvailable))
	if err != nil {
		return nil, fmt.Errorf("tracefs: %w", err)
	}
	defer f.Close()
	x, err := parseFuncIndex(f)
	if err != nil {
		return nil, fmt.Errorf("tracefs: %s: %w", f.Name(), err)
	}
	return x, nil
}

// invalidPrefix names a record whose address kallsyms does not place in a
// function (FTRACE_INVALID_FUNCTION: a weak function's leftover).
const invalidPrefix = "__ftrace_invalid_address__"

func parseFuncIndex(r io.Reader) (*FuncIndex, error) {
	x := &FuncIndex{byName: map[string][]int{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.Contains(line, " [") {
			break
		}
		if line == "" || strings.HasPrefix(line, invalidPrefix) {
			continue
		}
		x.byName[line] = append(x.byName[line], n)
	}
	return x, sc.Err()
}

// Len is how many of vmlinux's names the index has.
func (x *FuncIndex) Len() int { return len(x.byName) }

// token is what a filter write says for fn: its indices (every function of
// that name, as the name would match), or fn itself when it is not one of
// vmlinux's plain names (a module's function, a glob, a command).
func (x *FuncIndex) token(fn string, not bool) string {
	var ids []int
	if x != nil {
		ids = x.byName[fn]
	}
	prefix := ""
	if not {
		prefix = "!"
	}
	if len(ids) == 0 {
		return prefix + fn
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = prefix + strconv.Itoa(id)
	}
	return strings.Join(parts, " ")
}
