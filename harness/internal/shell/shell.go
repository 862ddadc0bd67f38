// Package shell quotes words for a POSIX shell: the repro line a developer
// pastes, and the commands run on a board through its sshd's shell.
package shell

import "strings"

// Quote returns s as one shell word: unchanged when it holds only
// characters no shell treats specially, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
