package emit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PortName is the virtio-serial port name the host gives the agent channel
// (QEMU: -device virtserialport,name=fth.agent).
const PortName = "fth.agent"

// Default locations of the virtio port class in sysfs and of device nodes.
const (
	VirtioPortsDir = "/sys/class/virtio-ports"
	DevDir         = "/dev"
)

// ErrNoPort means no virtio-serial port carries the wanted name.
var ErrNoPort = errors.New("no virtio-serial port named " + PortName)

// FindPort returns the device directory name (e.g. "vport0p1") of the
// virtio-serial port called name, looking in sysDir (normally VirtioPortsDir).
func FindPort(sysDir, name string) (string, error) {
	entries, err := os.ReadDir(sysDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", ErrNoPort
		}
		return "", fmt.Errorf("emit.FindPort: %w", err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(sysDir, e.Name(), "name"))
		if err != nil {
			// A port without a name (or one that vanished) is not ours.
			continue
		}
		if strings.TrimSpace(string(b)) == name {
			return e.Name(), nil
		}
	}
	return "", ErrNoPort
}

// OpenPort opens the device node of port for writing. If devDir has no node
// for it (a /dev without devtmpfs), the node is created from the major:minor
// in sysDir/port/dev, because losing the channel would lose the whole run.
func OpenPort(sysDir, devDir, port string) (*os.File, error) {
	return openPort(sysDir, devDir, port, os.O_WRONLY)
}

// OpenPortRW is OpenPort for a port the agent also reads from: the race
// scenario's control port.
func OpenPortRW(sysDir, devDir, port string) (*os.File, error) {
	return openPort(sysDir, devDir, port, os.O_RDWR)
}

func openPort(sysDir, devDir, port string, flag int) (*os.File, error) {
	path := filepath.Join(devDir, port)
	f, err := os.OpenFile(path, flag, 0)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("emit.OpenPort: %w", err)
	}
	b, rerr := os.ReadFile(filepath.Join(sysDir, port, "dev"))
	if rerr != nil {
		return nil, fmt.Errorf("emit.OpenPort: %w (and no dev number: %w)", err, rerr)
	}
	maj, min, ok := parseDevNumber(string(b))
	if !ok {
		return nil, fmt.Errorf("emit.OpenPort: %w (bad dev number %q)", err, strings.TrimSpace(string(b)))
	}
	if merr := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(maj, min))); merr != nil {
		return nil, fmt.Errorf("emit.OpenPort: mknod %s: %w", path, merr)
	}
	f, err = os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("emit.OpenPort: %w", err)
	}
	return f, nil
}

func parseDevNumber(s string) (maj, min uint32, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(s), ":")
	if !found {
		return 0, 0, false
	}
	ma, err1 := strconv.ParseUint(a, 10, 32)
	mi, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uint32(ma), uint32(mi), true
}

// Channel is where events go.
type Channel struct {
	// W receives the event lines.
	W io.Writer
	// Path names the destination for Hello.Args ("stdout" or a file path).
	Path string
	// Warning is set when the wanted destination was not available and the
	// channel fell back to stdout.
	Warning string
	closer  io.Closer
}

// Close closes the destination unless it is stdout.
func (c *Channel) Close() error {
	if c.closer == nil {
		return nil
	}
	return c.closer.Close()
}

// Open returns the event channel for the events option: "" auto-detects the
// virtio port named PortName under sysDir/devDir and falls back to stdout;
// "-" or "stdout" is stdout; anything else is a path opened for appending
// (created if missing). An explicit path that cannot be opened is an error,
// because the caller asked for it.
func Open(events, sysDir, devDir string, stdout io.Writer) (*Channel, error) {
	switch events {
	case "-", "stdout":
		return &Channel{W: stdout, Path: "stdout"}, nil
	case "":
		port, err := FindPort(sysDir, PortName)
		if err != nil {
			return &Channel{W: stdout, Path: "stdout", Warning: fmt.Sprintf("events: %v; writing events to stdout", err)}, nil
		}
		f, err := OpenPort(sysDir, devDir, port)
		if err != nil {
			return &Channel{W: stdout, Path: "stdout", Warning: fmt.Sprintf("events: port %s: %v; writing events to stdout", port, err)}, nil
		}
		return &Channel{W: f, Path: f.Name(), closer: f}, nil
	default:
		f, err := os.OpenFile(events, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("emit.Open: events=%s: %w", events, err)
		}
		return &Channel{W: f, Path: events, closer: f}, nil
	}
}
