package soak

import (
	"fmt"
	"strconv"
	"strings"
)

// kmsgRecord is one /dev/kmsg record: "PRI,SEQ,TS_USEC,FLAGS[,..];TEXT".
// Continuation lines (" KEY=value", the record's dictionary) are not
// records.
type kmsgRecord struct {
	Seq  uint64
	TSus uint64
	Text string
}

// parseKmsg parses one line read from /dev/kmsg. ok is false for
// dictionary continuation lines and anything malformed.
func parseKmsg(line string) (kmsgRecord, bool) {
	if line == "" || line[0] == ' ' {
		return kmsgRecord{}, false
	}
	head, text, found := strings.Cut(line, ";")
	if !found {
		return kmsgRecord{}, false
	}
	f := strings.Split(head, ",")
	if len(f) < 3 {
		return kmsgRecord{}, false
	}
	seq, err1 := strconv.ParseUint(f[1], 10, 64)
	ts, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return kmsgRecord{}, false
	}
	return kmsgRecord{Seq: seq, TSus: ts, Text: unescapeKmsg(text)}, true
}

// Line renders the record the way the serial console prints it with
// printk.time=1, which is what the crash parser and its corpus know.
func (r kmsgRecord) Line() string {
	return fmt.Sprintf("[%5d.%06d] %s", r.TSus/1e6, r.TSus%1e6, r.Text)
}

// unescapeKmsg undoes /dev/kmsg's \xNN escaping of non-printable bytes
// (tabs in stack dumps come through as \x09).
func unescapeKmsg(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
