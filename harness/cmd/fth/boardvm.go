package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/images"
	"github.com/ftrace-harness/fth/results"
)

// boardReady is what the guest prints once sshd listens (stress/agent's
// board mode).
const boardReady = "fth-board: sshd listening"

// cmdBoardVM boots a VM that stands in for an SSH board: the harness's
// kernel with u-root's sshd, reachable on 127.0.0.1 only, rebooting (not
// exiting) when it panics, with ramoops where the arch row supports it.
func cmdBoardVM(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("boardvm")
	var b buildFlags
	b.register(fs, withAll)
	def := matrix.DefaultParams()
	var (
		port    = fs.Int("port", 2222, "host port on 127.0.0.1 forwarded to the VM's sshd")
		dir     = fs.String("dir", "out/boardvm", "directory for the keys, known_hosts and console.log")
		cpus    = fs.Int("cpus", def.CPUs, "guest vCPUs")
		mem     = fs.Int("mem", def.MemoryMB, "guest memory in MiB (ramoops needs 1024 on x86_64)")
		preempt = fs.String("preempt", "full", "preempt= boot parameter")
		accelF  = fs.String("accel", "tcg-single", "QEMU accelerator")
	)
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth boardvm [flags]",
		About: "Boots a VM that stands in for an SSH board: the harness's kernel with u-root's\nsshd on 127.0.0.1:--port, rebooting (not exiting) on a panic, with ramoops\nwhere the arch row has it. It writes keys and known_hosts to --dir and runs\nuntil interrupted; SIGUSR1 pulls its network cable, SIGUSR2 puts it back.",
	}); err != nil {
		return err
	}
	if *port <= 0 || *port > 65535 {
		return fmt.Errorf("%w: --port %d: want 1 to 65535", errUsage, *port)
	}
	if err := checkBoot(*cpus, *mem, time.Hour, time.Minute, *preempt); err != nil {
		return err
	}
	accel, err := qemu.ParseAccel(*accelF)
	if err != nil {
		return fmt.Errorf("%w: --accel: %v", errUsage, err)
	}
	a, repo, frags, err := b.resolve()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	keys, err := boardKeys(*dir, *port)
	if err != nil {
		return err
	}
	log := newLogger(stderr, b.verbose)
	env := b.env(log, repo)
	k, files, err := env.BuildKernel(ctx, a, b.toolchain, frags)
	if err != nil {
		return err
	}
	img, err := env.BuildImage(ctx, a)
	if err != nil {
		return err
	}
	if files == nil {
		files = map[string]string{}
	}
	files["/etc/fth/ssh_host_key"] = keys.hostKey
	files["/etc/fth/authorized_keys"] = keys.authorized
	if img, err = images.Overlay(log, img, files, b.cache); err != nil {
		return err
	}
	if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*port)); err != nil {
		return fmt.Errorf("port 127.0.0.1:%d is taken (%v): pick another with --port", *port, err)
	} else {
		ln.Close()
	}
	sockDir, err := os.MkdirTemp("", "fth-board-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sockDir)
	cmdline := []string{"fth.board=1"}
	if *preempt != "" {
		cmdline = append(cmdline, "preempt="+*preempt)
	}
	cmdline = append(cmdline, a.BoardCmdline...)
	vm, err := qemu.Start(ctx, log, qemu.Config{
		Arch: a, Kernel: k.Image, Initrd: img.Path, Cmdline: cmdline, CPUs: *cpus, MemoryMB: *mem,
		Accel: accel, SocketDir: sockDir, SSHPort: *port, Reboot: true,
	})
	if err != nil {
		return err
	}
	defer vm.Close()
	con, err := results.CreateLineLog(filepath.Join(*dir, "console.log"))
	if err != nil {
		return err
	}
	defer con.Close()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(vm.Console())
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := false
		for sc.Scan() {
			_ = con.Line(sc.Text())
			if !once && strings.Contains(sc.Text(), boardReady) {
				once = true
				close(ready)
			}
		}
	}()
	go func() { _, _ = io.Copy(io.Discard, vm.Agent()) }()
	bootTimeout := time.Duration(float64(3*time.Minute) * a.TimeoutScale)
	select {
	case <-ready:
	case <-vm.Exited():
		return fmt.Errorf("board VM exited before sshd came up: %v (console: %s)", vm.ExitError(), filepath.Join(*dir, "console.log"))
	case <-time.After(bootTimeout):
		return fmt.Errorf("board VM: sshd not up after %s (console: %s)", bootTimeout, filepath.Join(*dir, "console.log"))
	case <-ctx.Done():
		return ctx.Err()
	}
	// The guest says sshd started; the board is up when an SSH banner comes
	// back through the port forward.
	if err := waitBanner(ctx, *port, bootTimeout); err != nil {
		return fmt.Errorf("board VM: %w (console: %s)", err, filepath.Join(*dir, "console.log"))
	}
	// A network blip on demand, for the soak's blip path: SIGUSR1 pulls
	// the VM's cable, SIGUSR2 puts it back. The guest, its boot and its
	// processes go on as they would on a board behind a flaky switch.
	// Armed before "board up", which is when a caller may send them.
	link := make(chan os.Signal, 2)
	signal.Notify(link, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(link)
	fmt.Fprintf(stdout, "board up: ssh://root@127.0.0.1:%d known_hosts=%s identity=%s console=%s\n",
		*port, keys.knownHosts, keys.identity, filepath.Join(*dir, "console.log"))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-vm.Exited():
			return fmt.Errorf("board VM exited: %v", vm.ExitError())
		case sig := <-link:
			up := sig == syscall.SIGUSR2
			if err := vm.SetLink(ctx, up); err != nil {
				log.Error("board VM: set link", "up", up, "err", err)
				continue
			}
			log.Warn("board VM: network link set", "up", up)
			fmt.Fprintf(stdout, "board link: up=%v\n", up)
		}
	}
}

type boardKeyFiles struct {
	hostKey, authorized, identity, knownHosts string
}

// boardKeys creates (once) the VM's host key and the client key it accepts,
// and writes a known_hosts naming the host key for [127.0.0.1]:port, so
// the soak verifies the VM like any board.
func boardKeys(dir string, port int) (boardKeyFiles, error) {
	f := boardKeyFiles{
		hostKey:    filepath.Join(dir, "ssh_host_ed25519_key"),
		authorized: filepath.Join(dir, "authorized_keys"),
		identity:   filepath.Join(dir, "id_ed25519"),
		knownHosts: filepath.Join(dir, "known_hosts"),
	}
	hostPub, err := ensureKey(f.hostKey)
	if err != nil {
		return f, err
	}
	clientPub, err := ensureKey(f.identity)
	if err != nil {
		return f, err
	}
	if err := os.WriteFile(f.authorized, gossh.MarshalAuthorizedKey(clientPub), 0o644); err != nil {
		return f, err
	}
	line := knownhosts.Line([]string{knownhosts.Normalize("127.0.0.1:" + strconv.Itoa(port))}, hostPub)
	return f, os.WriteFile(f.knownHosts, []byte(line+"\n"), 0o644)
}

// ensureKey loads the ed25519 key at path, creating it if missing.
func ensureKey(path string) (gossh.PublicKey, error) {
	if b, err := os.ReadFile(path); err == nil {
		s, err := gossh.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (delete it to get a new one)", path, err)
		}
		return s.PublicKey(), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := gossh.MarshalPrivateKey(priv, "fth board VM")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, err
	}
	return gossh.NewPublicKey(pub)
}

// waitBanner waits until 127.0.0.1:port answers with an SSH banner.
func waitBanner(ctx context.Context, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4)
			_, err = io.ReadFull(c, buf)
			c.Close()
			if err == nil && string(buf) == "SSH-" {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("not an SSH banner: %q", buf)
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("no SSH banner on 127.0.0.1:%d within %s: %v", port, limit, last)
}
