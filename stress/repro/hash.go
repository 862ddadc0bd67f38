package repro

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/disasm"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/inject"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
)

// The kernel's names the direct-unregister-free sequence holds vCPUs in.
const (
	// directLookup is the call path's lookup of a direct call's address
	// by ip in the global direct_functions hash (7.3, x86_64:
	// call_direct_funcs, under preempt_disable_notrace only).
	directLookup = "ftrace_find_rec_direct"
	// directRemove is unregister_ftrace_direct()'s removal of the
	// ops' entries from that hash: hlist_del_rcu, then kfree at once.
	directRemove = "remove_direct_functions_hash"
)

// directReaders are functions the racer's write to fth_target's call file
// passes through, each a candidate for the reader's function: the one
// whose ip shares fth_deliver_seq's bucket in direct_functions.
var directReaders = []string{fthtarget.Counted, fthtarget.Caller, "full_proxy_write", "vfs_write", "ksys_write", "__x64_sys_write", "rw_verify_area", "security_file_permission"}

// goldenRatio64 is the kernel's GOLDEN_RATIO_64 (include/linux/hash.h):
// hash_long(ip, bits) on a 64-bit kernel is the top bits of ip times it.
const goldenRatio64 = 0x61C8864680B583EB

// hashBucket is ftrace_hash_key(): the bucket of ip in a hash of 1<<bits.
func hashBucket(ip uint64, bits int) uint64 {
	if bits == 0 {
		return 0
	}
	return (ip * goldenRatio64) >> (64 - bits)
}

// directBits is direct_functions' size_bits once the reader's BPF
// trampoline and fth_deliver's direct call are its only entries:
// register_ftrace_direct() sizes its copy fls(2) = 2 bits.
const directBits = 2

// writerReach is how long the host waits for the writer to reach the
// removal: a probe's removal first waits for grace periods
// (unregister_ftrace_function_probe_func), which took over 10 s on a
// loaded machine (a campaign beside it) and failed the control.
const writerReach = 30 * time.Second

// writerTries is how many times a hash race arms the writer when the
// host never stopped it.
const writerTries = 2

// errWriterNotStopped is a hash race's writer arm that timed out.
var errWriterNotStopped = errors.New("the writer was not stopped")

// readerHold is how long the reader stays held after the writer has gone
// on: the writer's kfree needs microseconds.
const readerHold = 300 * time.Millisecond

// directFree (direct-unregister-free): on x86_64 7.3 the call path
// of a function whose callsite is shared by a direct call and another
// ftrace_ops (the list function) looks the direct address up by ip in the
// global direct_functions hash (call_direct_funcs -> ftrace_find_rec_direct),
// protected by preempt_disable_notrace alone. unregister_ftrace_direct()
// takes its ops' entries out of that same hash in place (hlist_del_rcu)
// and kfree()s each at once, with no grace period: a lookup walking the
// bucket at that moment holds freed memory and follows its next pointer.
// The sequence makes the moment happen: the writer (fth_deliver's direct
// user detaching, on CPU 0) is held by the host at the removal, the reader
// (the racer's calls, on CPU 1) at the lookup's compare while it holds the
// entry being freed; the writer is let go (kfree), then the reader. With
// slab_debug=P the freed entry is poisoned and the reader's next step
// dereferences 0x6b6b6b6b6b6b6b6b. With holdFreed false
// (direct-unregister-live, the control) the reader is held at its own
// entry instead, behind the freed one: the same holds and frees, and
// nothing should fault.
//
// With viaTracefs (direct-unregister-free-tracefs and its control) the
// reader is tracefs's enabled_functions instead, whose every read looks
// each direct record up the same way (t_show, under ftrace_lock, which
// the removal does not take): no list function is needed, and kernels
// before 7.3, whose call path reads ops->direct_call, have this reader
// too.
func (sq *sequence) directFree(ctx context.Context, holdFreed, viaTracefs bool) error {
	logf := sq.logf
	r, closePort, err := sq.hashRaceStart("the one arch whose call path looks a direct call up in direct_functions (HAVE_SINGLE_FTRACE_DIRECT_OPS)")
	if err != nil {
		return err
	}
	defer closePort()
	d, err := sq.loadDeliver(2)
	if err != nil {
		return err
	}
	defer d.close()
	mod := d.mod

	ips, err := tracefs.New(tracefs.DefaultRoot).RecordIPs()
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	freedIP, ok := ips[deliver.FuncSeq]
	if !ok {
		return fmt.Errorf("repro: %s has no ftrace record", deliver.FuncSeq)
	}
	reader, readerIP := "", uint64(0)
	for _, fn := range directReaders {
		if ip, ok := ips[fn]; ok && hashBucket(ip, directBits) == hashBucket(freedIP, directBits) {
			reader, readerIP = fn, ip
			break
		}
	}
	if reader == "" {
		return fmt.Errorf("repro: none of %v shares %s's bucket (%d of %d) in direct_functions on this boot: boot again (module addresses move)",
			directReaders, deliver.FuncSeq, hashBucket(freedIP, directBits), 1<<directBits)
	}
	ipOff, err := entryIPOffset()
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	lookupAt, removeAt, cmps, err := r.decodeLookup(directLookup, directRemove, ipOff)
	if err != nil {
		return err
	}
	logf("reader %s (ip %#x) shares %s's (ip %#x) bucket %d of %d",
		reader, readerIP, deliver.FuncSeq, freedIP, hashBucket(freedIP, directBits), 1<<directBits)

	var dropInstance func()
	defer func() {
		if dropInstance != nil {
			dropInstance()
		}
	}()
	steps := []step{
		{"attach a BPF fentry to " + reader + " (its direct call, the first entry of direct_functions)", func() error {
			return d.link(reader, oracle.FEntry, "fentry-reader")
		}},
		{"switch a function tracer instance filtered to " + reader + " on (its callsite now goes through the list function, which looks the direct call up)", func() error {
			inst, drop, err := tracefs.New(tracefs.DefaultRoot).FilteredInstance("fth_repro", reader)
			if err != nil {
				return err
			}
			dropInstance = drop
			return inst.SetTracer("function")
		}},
		{"register fth_deliver.ko's direct call on " + deliver.FuncSeq + " (register_ftrace_direct: its entry goes in at the head of the shared bucket)", func() error {
			return mod.Attach("direct")
		}},
	}
	readWhat := "calls " + reader + " in a loop"
	racerArgs := []string{"1", fthtarget.Call}
	loop := byte(racer.Loop)
	if viaTracefs {
		// enabled_functions looks the fentry's record up: no second
		// ops is needed on the callsite.
		steps = slices.Delete(steps, 1, 2)
		readWhat = "reads enabled_functions in a loop (t_show looks up " + reader + "'s direct call)"
		racerArgs = append(racerArgs, filepath.Join(tracefs.DefaultRoot, "enabled_functions"))
		loop = racer.ReadLoop
	}
	total := len(steps) + 2
	if err := sq.doSteps(steps, total); err != nil {
		return err
	}

	h := hashRace{
		lookup: directLookup, lookupAt: lookupAt, cmps: cmps, ipOff: ipOff,
		remove: directRemove, removeAt: removeAt,
		reader: reader, readerIP: readerIP, freed: deliver.FuncSeq, freedIP: freedIP,
		racerArgs: racerArgs, loop: loop, readWhat: readWhat,
		write:     func() error { return mod.Detach("direct") },
		again:     func() error { return mod.Attach("direct") },
		writeWhat: "detach the direct call (unregister_ftrace_direct)",
		notReader: "this kernel's reader does not look direct calls up in direct_functions",
		total:     total,
	}
	return sq.raceHashFree(r, h, holdFreed)
}

// hashRace is one race of a reader's lookup in an ftrace hash against a
// writer that takes an entry out of it in place and frees it at once.
type hashRace struct {
	// lookup is the function whose loop compares an entry's ip, at
	// lookupAt; cmps are its compares of the entry's ip field (ipOff):
	// the first sees the bucket's head, the last the entries after it.
	lookup   string
	lookupAt uint64
	cmps     []disasm.FieldCompare
	ipOff    uint32
	// remove is the writer's removal, at removeAt: held there, the
	// writer has not freed the entry yet.
	remove   string
	removeAt uint64
	// The reader's function and the freed entry's, with their record
	// addresses: the freed entry is ahead of the reader's in their bucket.
	reader, freed     string
	readerIP, freedIP uint64
	// The racer (on CPU 1) and what it does; the writer's action (on CPU
	// 0), and what a reader that never looks the hash up means.
	racerArgs []string
	loop      byte
	readWhat  string
	write     func() error
	writeWhat string
	// again undoes a write that ran without the host stopping it, for
	// a second try.
	again     func() error
	notReader string
	// total numbers the steps logged: the setup's, then these two.
	total int
}

// raceHashFree runs h with its setup done: the reader started on CPU 1,
// a probe that it reaches the lookup at all, then the chained holds. With
// holdFreed the reader is held on the entry being freed (the bucket's
// head: the lookup's first compare), else on its own entry behind it
// (the last compare).
func (sq *sequence) raceHashFree(r *raceHolds, h hashRace, holdFreed bool) error {
	logf := sq.logf
	reader, err := racer.Start(racer.ModeRacer, h.racerArgs...)
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	defer reader.Stop()
	if err := reader.Poke(h.loop); err != nil {
		return fmt.Errorf("repro: start the reader: %w", err)
	}
	logf("the reader, on CPU 1, %s", h.readWhat)
	cmp, heldIP, heldWhat := h.cmps[0], h.freedIP, "the entry being freed ("+h.freed+"'s)"
	if !holdFreed {
		cmp, heldIP, heldWhat = h.cmps[len(h.cmps)-1], h.readerIP, "its own entry ("+h.reader+"'s), behind the one being freed"
	}
	logf("the lookup compares an entry's ip at %s+%#x: %s", h.lookup, cmp.Off, cmp.Text)
	looks, err := lookupReached(r, h.lookupAt+uint64(cmp.Off), cmp.Len)
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	if !looks {
		// Nothing to race, and no failure of the sequence: this kernel
		// has not this reader (6.12's call path reads ops->direct_call).
		logf("the reader never reached %s+%#x in %v: %s; nothing to race", h.lookup, cmp.Off, lookupProbe, h.notReader)
		return nil
	}
	want := binary.LittleEndian.AppendUint64(nil, heldIP)
	reg := cmp.Reg
	arm := event.RaceMsg{Op: event.RaceArm, Addr: h.removeAt, Size: 1, CPU: 0, TimeoutMS: int(writerReach / time.Millisecond),
		Then: &event.RaceMsg{Op: event.RaceArm, Addr: h.lookupAt + uint64(cmp.Off), Size: cmp.Len, CPU: 1, TimeoutMS: 5000,
			CondReg: &reg, CondAddr: uint64(h.ipOff), CondWant: hex.EncodeToString(want), HoldMS: int(readerHold / time.Millisecond)}}
	var (
		written    <-chan error
		heldReader bool
	)
	for try := 1; ; try++ {
		if err := r.Arm(arm); err != nil {
			return fmt.Errorf("repro: arm at %s: %w", h.remove, err)
		}
		logf("%d/%d %s from CPU 0, the host holding it at %s and the reader at %s+%#x on %s", h.total-1, h.total, h.writeWhat, h.remove, h.lookup, cmp.Off, heldWhat)
		written = onCPU0(h.write)
		heldReader, err = chainHolds(r, arm, h.remove)
		if err == nil {
			break
		}
		if !errors.Is(err, errWriterNotStopped) || try == writerTries || h.again == nil {
			return fmt.Errorf("repro: %w", err)
		}
		// Once in CI (a loaded host) the writer was not stopped within
		// writerReach: say whether its write ran through the removal
		// unstopped or is still waiting, and try once more if it ran.
		select {
		case werr := <-written:
			logf("the writer was not stopped at %s within %v, and its write came back (%v): setting it up again", h.remove, writerReach, werr)
		case <-time.After(writerReach):
			return fmt.Errorf("repro: %w, and its write was not back %v later", err, writerReach)
		}
		if err := h.again(); err != nil {
			return fmt.Errorf("repro: set up again: %w", err)
		}
	}
	if !heldReader {
		logf("%d/%d the reader never reached %s+%#x on %s while the writer was held: nothing raced (the bucket's order or size is not what this sequence expects)", h.total, h.total, h.lookup, cmp.Off, heldWhat)
	} else {
		logf("%d/%d the writer went through the removal while the reader held %s; the reader ran on %v later", h.total, h.total, heldWhat, readerHold)
	}
	select {
	case err := <-written:
		if err != nil {
			logf("%s: %v", h.writeWhat, err)
		}
	case <-time.After(30 * time.Second):
		logf("%s: not back after 30 s", h.writeWhat)
	}
	if err := reader.Poke('s'); err == nil {
		if line, err := reader.Read(5 * time.Second); err == nil {
			logf("reader: %s", line)
		} else {
			logf("reader: no answer after the window: %v", err)
		}
	}
	if !heldReader {
		return errors.New("repro: the reader was not held: the sequence did not run")
	}
	return nil
}

// lookupProbe is how long the reader has to reach the lookup once.
const lookupProbe = 3 * time.Second

// lookupReached says whether the reader on CPU 1 reaches the lookup at
// addr at all: the host holds it there a millisecond, or times out.
func lookupReached(r *raceHolds, addr uint64, size int) (bool, error) {
	probe := event.RaceMsg{Op: event.RaceArm, Addr: addr, Size: size, CPU: 1, TimeoutMS: int(lookupProbe / time.Millisecond), HoldMS: 1}
	if err := r.Arm(probe); err != nil {
		return false, fmt.Errorf("probe: %w", err)
	}
	m, err := r.Recv(lookupProbe + raceport.Slack)
	if err != nil {
		return false, err
	}
	switch m.Op {
	case event.RaceTimeout:
		return false, nil
	case event.RaceMissed:
		// Another CPU looked a direct call up: the kernel does; the
		// chained holds will say whether the reader does.
		return true, nil
	case event.RaceStopped:
		if _, err = r.Expect(raceport.Reply, event.RaceReleased); err != nil {
			return false, fmt.Errorf("probe release: %w", err)
		}
		return true, nil
	}
	return false, fmt.Errorf("probe: %+v", m)
}

// chainHolds reads the host's answers to a hash race's chained arm: the writer held
// (or not), then the reader's (thenHolds). It reports whether the reader
// was held.
func chainHolds(r *raceHolds, arm event.RaceMsg, remove string) (bool, error) {
	m, err := r.Recv(time.Duration(arm.TimeoutMS)*time.Millisecond + raceport.Slack)
	if err != nil {
		return false, err
	}
	if m.Op == event.RaceTimeout {
		return false, fmt.Errorf("%w at %s: %s", errWriterNotStopped, remove, m.Msg)
	}
	if m.Op != event.RaceStopped {
		return false, fmt.Errorf("the writer did not stop at %s: %+v", remove, m)
	}
	held, err := r.ThenHolds(*arm.Then)
	if err != nil {
		return held, fmt.Errorf("the reader's arm: %w", err)
	}
	return held, nil
}

// entryIPOffset is the offset of ip in the kernel's struct
// ftrace_func_entry, from its BTF.
func entryIPOffset() (uint32, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, fmt.Errorf("vmlinux BTF: %w", err)
	}
	var s *btf.Struct
	if err := spec.TypeByName("ftrace_func_entry", &s); err != nil {
		return 0, fmt.Errorf("struct ftrace_func_entry: %w", err)
	}
	for _, m := range s.Members {
		if m.Name == "ip" {
			return m.Offset.Bytes(), nil
		}
	}
	return 0, errors.New("struct ftrace_func_entry has no ip")
}

// The mapper sequences' kernel names and probe.
const (
	// mapperLookup is the lookup every function probe's callback makes
	// in its mapper (ftrace_func_mapper_find_ip calls it).
	mapperLookup = "ftrace_lookup_ip"
	// mapperRemove takes a function's entry out of a probe's mapper in
	// place and kfree()s it at once.
	mapperRemove = "ftrace_func_mapper_remove_ip"
	// mapperProbe is the function probe command the sequences set: an
	// enable_event probe keeps one mapper for all the functions it is
	// set on, of 1<<mapperBits buckets (FTRACE_HASH_DEFAULT_BITS).
	mapperProbe = "enable_event:sched:sched_switch"
	mapperBits  = 10
)

// mapperFree (mapper-remove-free): a function probe (set_ftrace_filter
// commands such as enable_event, traceon:N) keeps the data of each
// function it is set on in one ftrace_func_mapper, a hash its callback
// looks the function's ip up in on every call, with preemption off.
// Removing the probe from one function frees that function's mapper entry
// in place and at once (ftrace_func_mapper_remove_ip: hlist_del_rcu, then
// kfree), after a synchronize_rcu() that waited only for the calls of the
// functions being removed: a callback of another function the probe is
// still on may be walking the same bucket and hold the entry. The
// sequence sets the probe on call_write (the racer's path), then on a
// function whose ip shares call_write's bucket, which goes in at the
// bucket's head; the host holds the writer (the probe's removal from that
// function, on CPU 0) at the removal, and the reader (call_write's
// callback, on CPU 1) at ftrace_lookup_ip's compare while it holds the
// entry being freed. With holdFreed false (mapper-remove-live) the reader
// is held at its own entry behind it: the same holds and free, no fault.
func (sq *sequence) mapperFree(ctx context.Context, holdFreed bool) error {
	logf := sq.logf
	r, closePort, err := sq.hashRaceStart("the lookup's compare is found by decoding x86 (stress/disasm.FieldCompares)")
	if err != nil {
		return err
	}
	defer closePort()
	ips, err := tracefs.New(tracefs.DefaultRoot).RecordIPs()
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	reader := fthtarget.Caller
	readerIP, ok := ips[reader]
	if !ok {
		return fmt.Errorf("repro: %s has no ftrace record", reader)
	}
	// The first by name, for the same choice on every boot of a build.
	names := slices.Sorted(maps.Keys(ips))
	freed := ""
	for _, fn := range names {
		if fn != reader && !slices.Contains(directReaders, fn) && hashBucket(ips[fn], mapperBits) == hashBucket(readerIP, mapperBits) {
			freed = fn
			break
		}
	}
	if freed == "" {
		return fmt.Errorf("repro: no traceable function shares %s's bucket of %d", reader, 1<<mapperBits)
	}
	ipOff, err := entryIPOffset()
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	lookupAt, removeAt, cmps, err := r.decodeLookup(mapperLookup, mapperRemove, ipOff)
	if err != nil {
		return err
	}
	logf("reader %s (ip %#x) shares its bucket %d of %d with %s (ip %#x)",
		reader, readerIP, hashBucket(readerIP, mapperBits), 1<<mapperBits, freed, ips[freed])
	top := tracefs.New(tracefs.DefaultRoot)
	defer func() { _ = top.RemoveFilter(reader + ":" + mapperProbe) }()
	steps := []step{
		{"set an " + mapperProbe + " probe on " + reader + " (its entry in the probe's mapper)", func() error {
			return top.AddFilter(reader + ":" + mapperProbe)
		}},
		{"set the same probe on " + freed + " (its entry goes in at the head of the shared bucket)", func() error {
			return top.AddFilter(freed + ":" + mapperProbe)
		}},
	}
	total := len(steps) + 2
	if err := sq.doSteps(steps, total); err != nil {
		return err
	}
	return sq.raceHashFree(r, hashRace{
		lookup: mapperLookup, lookupAt: lookupAt, cmps: cmps, ipOff: ipOff,
		remove: mapperRemove, removeAt: removeAt,
		reader: reader, readerIP: readerIP, freed: freed, freedIP: ips[freed],
		racerArgs: []string{"1", fthtarget.Call}, loop: racer.Loop,
		readWhat:  "calls " + reader + " in a loop (its probe callback looks its ip up in the mapper)",
		write:     func() error { return top.RemoveFilter(freed + ":" + mapperProbe) },
		again:     func() error { return top.AddFilter(freed + ":" + mapperProbe) },
		writeWhat: "remove the probe from " + freed + " (unregister_ftrace_function_probe_func, then the probe's free: " + mapperRemove + ")",
		notReader: "this kernel's probe callback does not look its data up in a mapper",
		total:     total,
	}, holdFreed)
}

// hashRaceStart checks what a hash race needs (x86_64, for why; two
// CPUs), opens the race port and loads fth_target for the racer, with no
// kthreads of its own.
func (sq *sequence) hashRaceStart(why string) (*raceHolds, func(), error) {
	if runtime.GOARCH != "amd64" {
		return nil, nil, fmt.Errorf("repro %s: x86_64 only: %s", sq.Opts.Repro, why)
	}
	r, closePort, err := sq.openRacePort()
	if err != nil {
		return nil, nil, err
	}
	if err := fthtarget.Load(modload.DefaultDir, "nthreads=0"); err != nil {
		closePort()
		return nil, nil, fmt.Errorf("repro: load %s: %w", fthtarget.Module, err)
	}
	return r, closePort, nil
}

// openRacePort opens the race port for a sequence that holds vCPUs.
func (sq *sequence) openRacePort() (*raceHolds, func(), error) {
	if sq.NumCPU < 2 {
		return nil, nil, fmt.Errorf("repro %s: needs 2 CPUs (the writer held on one, the reader on the other), have %d", sq.Opts.Repro, sq.NumCPU)
	}
	port, err := raceport.Open(sq.VirtioDir, sq.DevDir)
	if errors.Is(err, raceport.ErrNoPort) {
		return nil, nil, fmt.Errorf("repro: %w (fth run boots one for this sequence)", err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("repro: %w", err)
	}
	return &raceHolds{inject.Holds{Port: port}}, func() { port.Close() }, nil
}

// decodeLookup finds the lookup's and the removal's addresses in kallsyms
// and the lookup's compares of an entry's ip (at ipOff), read through the
// host.
func (r *raceHolds) decodeLookup(lookup, remove string, ipOff uint32) (lookupAt, removeAt uint64, cmps []disasm.FieldCompare, err error) {
	syms, err := ksyms.Read("/proc/kallsyms", []string{lookup, remove})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("repro: %w", err)
	}
	lookupAt, ok1 := syms.Addr(lookup)
	removeAt, ok2 := syms.Addr(remove)
	if !ok1 || !ok2 {
		return 0, 0, nil, fmt.Errorf("repro: /proc/kallsyms has no %s or %s", lookup, remove)
	}
	raw, err := r.Port.ReadText(lookupAt, 128)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("repro: read %s: %w", lookup, err)
	}
	if cmps, err = disasm.FieldCompares(runtime.GOARCH, lookupAt, raw, int64(ipOff)); err != nil {
		return 0, 0, nil, fmt.Errorf("repro: %s: %w", lookup, err)
	}
	return lookupAt, removeAt, cmps, nil
}
