package ssh

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ftrace-harness/fth/harness/internal/shell"
)

// uploadSuffix marks the temporary file an upload writes before renaming it
// into place.
const uploadSuffix = ".fth-tmp"

// Upload writes r to remotePath on the board with the given permission bits
// (only mode.Perm() is applied). It runs `cat > tmp && chmod && mv` in a plain
// exec session, which works on minimal sshds without SFTP. The data goes to
// remotePath+".fth-tmp" and is renamed only once the remote size matches
// what was sent, so a dropped upload never leaves a half file at remotePath:
// a dropped connection gives cat a clean EOF, indistinguishable from the end
// of the data without that check.
func (c *Client) Upload(ctx context.Context, remotePath string, r io.Reader, mode os.FileMode) error {
	if remotePath == "" || strings.HasSuffix(remotePath, "/") {
		return fmt.Errorf("upload to %s: remote path %q must name a file", c.addr, remotePath)
	}
	if strings.ContainsRune(remotePath, 0) {
		return fmt.Errorf("upload to %s: remote path %q contains a NUL byte", c.addr, remotePath)
	}
	size, body, err := sized(r)
	if err != nil {
		return fmt.Errorf("upload %s to %s: reading the data: %w", remotePath, c.addr, err)
	}
	dst := safePath(remotePath)
	// The paths go through variables so the error message can name them
	// without pasting them into a double-quoted string, where $( ) would run.
	script := fmt.Sprintf(`t=%s; d=%s; `+
		`{ cat > "$t" && [ $(wc -c < "$t") -eq %d ] && chmod %04o "$t" && mv "$t" "$d"; } || `+
		`{ rm -f "$t"; echo "fth upload: failed or incomplete; $d left as it was" >&2; exit 1; }`,
		shell.Quote(dst+uploadSuffix), shell.Quote(dst), size, uint32(mode.Perm()))
	tail := &tailBuffer{max: stderrTail}
	// No SIGKILL on cancel: closing the session hands cat an early EOF, the
	// size check fails and the script removes the temporary file itself.
	if err := c.run(ctx, script, io.LimitReader(body, size), nil, tail, tail, false); err != nil {
		return fmt.Errorf("upload %d bytes to %s: %w", size, remotePath, err)
	}
	return nil
}

// sized returns how many bytes r will give, and a reader for them. A file or
// other seeker is measured in place; anything else is read into memory, which
// is fine for what a soak uploads (agents and scripts of a few MiB).
func sized(r io.Reader) (int64, io.Reader, error) {
	if s, ok := r.(io.Seeker); ok {
		cur, err := s.Seek(0, io.SeekCurrent)
		if err == nil {
			end, err := s.Seek(0, io.SeekEnd)
			if err != nil {
				return 0, nil, err
			}
			if _, err := s.Seek(cur, io.SeekStart); err != nil {
				return 0, nil, err
			}
			return end - cur, r, nil
		}
		// Not really seekable (a pipe behind *os.File): read it instead.
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, nil, err
	}
	return int64(len(b)), bytes.NewReader(b), nil
}

// safePath keeps a relative path starting with "-" from being read as an
// option by chmod and mv.
func safePath(p string) string {
	if strings.HasPrefix(p, "-") {
		return "./" + p
	}
	return p
}
