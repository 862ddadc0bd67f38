package repro

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/racer"
)

// ModeLinker is `agent linker <cpu> <func>`: pinned to cpu, it loads a
// BPF fentry program on func, says "ready", and links it when it reads a
// byte, answering "linked <errno>"; the link stays until its stdin closes.
// A repro sequence that has the host hold a CPU in the middle of an
// attach runs the attach here, in a process of its own: the agent's
// address space is then not live on the held CPU, so that its memory
// changes (the Go runtime's) wait for no TLB flush there.
const ModeLinker = "linker"

// linkerComm names the linker's threads.
const linkerComm = "fth-linker"

// LinkerMain is the linker (ModeLinker), run as the agent's subcommand;
// args are its <cpu> <func>.
func LinkerMain(args []string) error {
	if len(args) != 2 {
		return errors.New("agent linker: want <cpu> <func>")
	}
	cpu, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("agent linker: cpu %q", args[0])
	}
	if err := racer.PinProcess(cpu, 0, linkerComm); err != nil {
		return fmt.Errorf("agent linker: %w", err)
	}
	loader, err := oracle.NewLoader(1, nil)
	if err != nil {
		return fmt.Errorf("agent linker: %w", err)
	}
	defer loader.Close()
	ld, err := loader.Load(args[1], oracle.FEntry, "linker-"+args[1])
	if err != nil {
		return fmt.Errorf("agent linker: %w", err)
	}
	defer ld.Prog.Close()
	fmt.Println("ready")
	buf := make([]byte, 1)
	if n := racer.RawRead(0, buf); n <= 0 {
		return nil
	}
	fd, errno := attach.LinkCreate(ld.Prog.FD(), oracle.FEntry.LinkType())
	fmt.Printf("linked %d\n", int(errno))
	if errno == 0 {
		defer unix.Close(fd)
	}
	// Until the agent is done with it.
	for racer.RawRead(0, buf) > 0 {
	}
	return nil
}
