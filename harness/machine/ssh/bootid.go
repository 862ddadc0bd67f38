package ssh

import (
	"context"
	"fmt"
	"strings"
)

// bootIDPath is the kernel's random ID of the current boot: it changes on
// every boot, so seeing a new one after a reconnect proves a reboot even when
// uptime or dmesg would be ambiguous.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// BootID returns the board's boot_id, a lowercase UUID.
func (c *Client) BootID(ctx context.Context) (string, error) {
	out, err := c.Output(ctx, "cat "+bootIDPath)
	if err != nil {
		return "", fmt.Errorf("read boot_id: %w", err)
	}
	id := strings.TrimSpace(string(out))
	if !isUUID(id) {
		return "", fmt.Errorf("read boot_id on %s: %s gave %q, not a UUID: is /proc mounted on the board?", c.addr, bootIDPath, id)
	}
	return id, nil
}

// isUUID reports whether s is a UUID in the kernel's 8-4-4-4-12 lowercase hex
// form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
				return false
			}
		}
	}
	return true
}
