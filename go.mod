module github.com/ftrace-harness/fth

go 1.26.8

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/cilium/ebpf v0.22.0
	github.com/digitalocean/go-qemu v0.0.0-20230711162256-2e3d0186973e
	github.com/schollz/progressbar/v3 v3.19.0
	github.com/u-root/gobusybox/src v0.3.0
	github.com/u-root/mkuimage v0.2.0
	github.com/u-root/u-root v0.16.0
	github.com/u-root/uio v0.0.0-20240224005618-d2acac8f3701
	golang.org/x/arch v0.33.0
	golang.org/x/crypto v0.45.0
	golang.org/x/sync v0.20.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.37.0
	gonum.org/v1/gonum v0.16.0
	gonum.org/v1/plot v0.17.0
	gopkg.in/yaml.v3 v3.0.1
	mvdan.cc/sh/v3 v3.11.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/atotto/clipboard v0.1.4 // indirect
	github.com/aymanbagabas/go-osc52/v2 v2.0.1 // indirect
	github.com/charmbracelet/bubbles v0.15.1-0.20230123181021-a6a12c4a31eb // indirect
	github.com/charmbracelet/bubbletea v0.24.1 // indirect
	github.com/charmbracelet/lipgloss v0.7.1 // indirect
	github.com/containerd/console v1.0.4-0.20230706203907-8f6c4e4faef5 // indirect
	github.com/digitalocean/go-libvirt v0.0.0-20220804181439-8648fbde413e // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/hugelgupf/go-shlex v0.0.0-20200702092117-c80c9d0918fa // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/klauspost/pgzip v1.2.6 // indirect
	github.com/knz/bubbline v0.0.0-20230717192058-486954f9953f // indirect
	github.com/kr/fs v0.1.0 // indirect
	github.com/lucasb-eyer/go-colorful v1.2.0 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/mattn/go-localereader v0.0.1 // indirect
	github.com/mattn/go-runewidth v0.0.16 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/muesli/ansi v0.0.0-20230316100256-276c6243b2f6 // indirect
	github.com/muesli/cancelreader v0.2.2 // indirect
	github.com/muesli/reflow v0.3.0 // indirect
	github.com/muesli/termenv v0.15.1 // indirect
	github.com/peterh/liner v1.2.2 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	github.com/pkg/sftp v1.13.9 // indirect
	github.com/rck/unit v0.0.3 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/sahilm/fuzzy v0.1.0 // indirect
	github.com/ulikunitz/xz v0.5.15 // indirect
	github.com/vishvananda/netlink v1.3.0 // indirect
	github.com/vishvananda/netns v0.0.4 // indirect
	golang.org/x/exp v0.0.0-20260312153236-7ab1446f8b90 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/mod v0.34.0 // indirect
	golang.org/x/text v0.31.0 // indirect
	golang.org/x/tools v0.43.0 // indirect
)

tool (
	github.com/u-root/u-root/cmds/core/cat
	github.com/u-root/u-root/cmds/core/chmod
	github.com/u-root/u-root/cmds/core/dd
	github.com/u-root/u-root/cmds/core/gosh
	github.com/u-root/u-root/cmds/core/init
	github.com/u-root/u-root/cmds/core/ip
	github.com/u-root/u-root/cmds/core/kill
	github.com/u-root/u-root/cmds/core/ls
	github.com/u-root/u-root/cmds/core/mkdir
	github.com/u-root/u-root/cmds/core/mv
	github.com/u-root/u-root/cmds/core/rm
	github.com/u-root/u-root/cmds/core/sleep
	github.com/u-root/u-root/cmds/core/sshd
	github.com/u-root/u-root/cmds/core/uname
	github.com/u-root/u-root/cmds/core/wc
)
