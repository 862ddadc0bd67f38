package results

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ftrace-harness/fth/results/regs"
	"github.com/ftrace-harness/fth/wire/event"
)

// cpuRe finds the CPU a report came from.
var cpuRe = regexp.MustCompile(`(?m)\bCPU: (\d+)\b`)

// injectionSpan is how far past the injected address a fault still lies
// in the same trampoline image or callsite: an image is at most a page.
const injectionSpan = 4096

// AttributeInjection judges the race scenario's last injection when the
// kernel died before the agent could: the injection still "released" is
// marked crashed with the first counted report's title. A report whose
// faulting address is unnamed and lies in that trampoline or callsite
// (freed memory has no symbol) is titled after the injection's place,
// whatever frame below it the stack named; so is a report that names no
// function at all (a jump through a stale register lands nowhere) when it
// came from the held CPU: the title then says where the preempted task
// was.
// It returns whether it changed r.
func AttributeInjection(r *Result) bool {
	n := len(r.Injections)
	// Released and not judged, or seen changed under the held task: the
	// agent's last word before the kernel died.
	if n == 0 || (r.Injections[n-1].Outcome != event.InjReleased && r.Injections[n-1].Outcome != event.InjFreedUnderTask) {
		return false
	}
	in := &r.Injections[n-1]
	addr, err := strconv.ParseUint(strings.TrimPrefix(in.Addr, "0x"), 16, 64)
	if err != nil {
		return false
	}
	place, _, _ := strings.Cut(in.Symbol, "+")
	changed := false
	for i := range r.Findings {
		f := &r.Findings[i]
		// Only the console's reports can be placed after the injection:
		// a pstore or previous-boot record, or the soak's own finding,
		// cannot.
		if f.Source != "" || !f.Countable(false) {
			continue
		}
		pc, ok := faultPC(f.Report)
		// The image starts Offset bytes before the held place.
		base := addr - uint64(in.Offset)
		// AttributeFreedImage has named a fault in an image it saw.
		_, watched := r.imageAt(pc)
		// A fault in the place outranks the function the report's stack
		// named: once the held task had built its frame (x86, held past
		// "mov %rsp,%rbp") the unwinder trusts the traced function's
		// return address, and "Oops: int3 in fth_target_counted" named the
		// victim, not the freed image it trapped in (CI, 2026-11-28).
		inPlace := ok && pc >= base && pc < base+injectionSpan && !watched
		if inPlace || (f.Function == "" && reportCPU(f.Report) == in.CPU) {
			f.retitle(place, place)
		}
		if in.Outcome == event.InjReleased || in.Outcome == event.InjFreedUnderTask {
			msg := fmt.Sprintf("the kernel died after injection %d released the task at %s", in.Seq, in.Symbol)
			if in.Outcome == event.InjFreedUnderTask {
				msg += fmt.Sprintf(", whose instruction had changed from %s to %q under it", in.Insn, in.InsnAfter)
			}
			in.Outcome, in.Title, in.Msg = event.InjCrashed, f.Title, msg
		}
		changed = true
	}
	return changed
}

// faultPC is the faulting address of a report when it is printed as a raw
// address (regs.RawPC): no symbol covers it, as freed trampoline memory
// never has one.
func faultPC(report string) (uint64, bool) {
	m := regs.RawPC().FindStringSubmatch(report)
	if m == nil {
		return 0, false
	}
	pc, err := strconv.ParseUint(m[1], 16, 64)
	return pc, err == nil
}

// reportCPU is the CPU a report names, -1 if none.
func reportCPU(report string) int {
	m := cpuRe.FindStringSubmatch(report)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}

// AttributeFreedImage names the trampoline image a report's fault lies in
// when no symbol covers its address: freed memory (an image gone from
// kallsyms, its pages filled with traps: x86's int3, arm64's BRK) has
// none, so the parser named the first frame of the stack instead
// ("Oops: int3 in sched_yield"), or nothing ("Oops: BRK"). The
// image the agent last saw registered there is what was freed: the title
// says "in freed bpf_trampoline_<key>". It returns whether it changed r.
func AttributeFreedImage(r *Result) bool {
	changed := false
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Source != "" || !f.Countable(false) {
			continue
		}
		pc, ok := faultPC(f.Report)
		if !ok {
			continue
		}
		im, found := r.imageAt(pc)
		if !found {
			continue
		}
		f.retitle(im.Name, "freed "+im.Name)
		changed = true
	}
	return changed
}

// retitle names fn as the place of f's fault, shown in the title as
// shown, instead of the function the title named, if any.
func (f *Finding) retitle(fn, shown string) {
	if f.Function != "" {
		f.Title = strings.TrimSuffix(f.Title, " in "+f.Function)
	}
	f.Title += " in " + shown
	f.Function = fn
}

// imageAt is the latest trampoline image the agent saw registered at pc:
// pages are reused by later images.
func (r *Result) imageAt(pc uint64) (event.Image, bool) {
	for j := len(r.images) - 1; j >= 0; j-- {
		if im := r.images[j]; pc >= im.Addr && pc < im.Addr+uint64(im.Len) {
			return im, true
		}
	}
	return event.Image{}, false
}
