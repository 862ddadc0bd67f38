package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/wire/options"
)

// Files the harness puts in a board VM's initramfs (an overlay of the
// image): the host key the test's known_hosts expects, and the public key
// it logs in with.
const (
	boardHostKey        = "/etc/fth/ssh_host_key"
	boardAuthorizedKeys = "/etc/fth/authorized_keys"
)

// defaultBoardAddr is eth0's address on QEMU's user-mode network.
const defaultBoardAddr = "10.0.2.15/24"

// boardFromCmdline reports whether the kernel command line asks for board
// mode (fth.board=1) and with which address (fth.boardaddr). They choose
// the agent's mode and are not scenario options: outside board mode the
// option parser refuses them like any unknown key.
func boardFromCmdline(cmdline []byte) (board bool, addr string) {
	for _, kv := range options.ParseCmdline(string(cmdline)) {
		switch kv.Key {
		case options.CmdlinePrefix + "board":
			board = !kv.HasValue || kv.Value == "1" || kv.Value == "true"
		case options.CmdlinePrefix + "boardaddr":
			addr = kv.Value
		}
	}
	return board, addr
}

// runBoard makes the VM stand in for an SSH board: loopback and eth0 up at
// addr (QEMU user networking's gateway is .2 of the subnet), then u-root's
// sshd in the foreground until ctx ends. It never powers off: a board
// reboots only when its kernel panics.
func runBoard(ctx context.Context, addr string, out io.Writer) error {
	ip, nw, err := net.ParseCIDR(addr)
	if err != nil {
		return fmt.Errorf("board: boardaddr %q: %w", addr, err)
	}
	gw := nw.IP.To4()
	if gw == nil {
		return fmt.Errorf("board: boardaddr %q: want an IPv4 address", addr)
	}
	gw = append(net.IP(nil), gw...)
	gw[3] = 2
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "addr", "add", addr, "dev", "eth0"},
		{"ip", "route", "add", "default", "via", gw.String()},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, command(s[0]), s[1:]...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("board: %v: %w", s, err)
		}
	}
	// A real board's init mounts pstore; u-root's does not. The soak reads
	// the records of the crash that rebooted the board from here.
	if err := unix.Mount("pstore", "/sys/fs/pstore", "pstore", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		fmt.Fprintf(out, "fth-board: mount pstore: %v (crash records will be missing)\n", err)
	}
	for _, f := range []string{boardHostKey, boardAuthorizedKeys} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("board: %w (the harness puts it in the initramfs)", err)
		}
	}
	sshd := exec.CommandContext(ctx, command("sshd"), "-privatekey", boardHostKey, "-keys", boardAuthorizedKeys, "-port", "22")
	sshd.Stdout, sshd.Stderr = out, out
	// Commands run from / with a PATH that finds u-root's commands.
	sshd.Dir = "/"
	sshd.Env = append(os.Environ(), "PATH=/bin:/bbin:/ubin:/usr/bin:/usr/sbin:/sbin")
	if err := sshd.Start(); err != nil {
		return fmt.Errorf("board: sshd: %w", err)
	}
	fmt.Fprintf(out, "fth-board: sshd listening on port 22 at %s\n", ip)
	return sshd.Wait()
}

// command finds a u-root command: on PATH, else in /bbin (busybox mode).
func command(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return filepath.Join("/bbin", name)
}
