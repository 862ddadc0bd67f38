#!/usr/bin/env bash
# Installs everything ftrace-harness needs on Debian 12 (bookworm), as root,
# and builds the trixie toolchain root (scripts/toolroot.sh).
#
# Linux 7.3 comes from Debian's trixie-backports suite. That suite is added with a
# low pin so that nothing else on the machine upgrades from it, and the source
# package is fetched with `apt-get download` + `dpkg-deb -x` rather than
# `apt-get install -t trixie-backports`, which would drag linux-libc-dev 7.3 in.
#
# The mirror is never hard-coded: the trixie-backports entry reuses the URI that
# this machine's bookworm source already points at.
set -euo pipefail

SRC_ROOT=${FTH_SRC_ROOT:-/var/cache/fth/src}
# Kernel series to unpack: 7.3 (the default kernel) and 6.12, the riscv64
# kernel of the race scenario's seed (docs/race-injection.md).
KERNELS=${FTH_KERNELS:-7.3 6.12}

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

log() { printf 'deps: %s\n' "$*" >&2; }

mirror_uri() {
	local uri=""
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		uri=$(awk '/^URIs:/ && !/security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
		uri=$(awk '$1=="deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list)
	fi
	if [ -z "$uri" ]; then
		echo "deps: cannot find this machine's bookworm apt mirror in /etc/apt/sources.list{,.d/debian.sources}; add trixie-backports by hand (see docs/setup.md)" >&2
		exit 1
	fi
	printf '%s\n' "$uri"
}

add_backports() {
	local list=/etc/apt/sources.list.d/fth-trixie-backports.sources
	local pin=/etc/apt/preferences.d/fth-trixie-backports
	if [ ! -f "$list" ]; then
		local uri; uri=$(mirror_uri)
		log "adding trixie-backports from $uri (pinned to 50)"
		sudo_ tee "$list" >/dev/null <<EOT
Types: deb
URIs: $uri
Suites: trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOT
	fi
	# Pin 50: below the default 500 of bookworm, so no installed package is ever
	# upgraded from trixie; only explicit name/suite requests reach it.
	sudo_ tee "$pin" >/dev/null <<EOT
Package: *
Pin: release n=trixie-backports
Pin-Priority: 50
EOT
}

PKGS=(
	# kernel build
	build-essential flex bison bc libelf-dev libssl-dev dwarves ccache cpio kmod
	python3 rsync xz-utils zstd
	# fth mutate: patch(1) applies a mutant to a scratch copy, unshare(1)
	# binds it over the tree in a private mount namespace
	patch util-linux
	# cross builds: gcc for arm64 and ppc64le, LLVM for riscv64 (gcc 12 lacks
	# -fmin-function-alignment, so riscv CALL_OPS would need RVC off)
	gcc-aarch64-linux-gnu gcc-riscv64-linux-gnu gcc-powerpc64le-linux-gnu
	clang-19 lld-19 llvm-19
	# boot
	qemu-system-x86 qemu-system-arm qemu-system-misc qemu-system-ppc qemu-utils
	# report: results/report's browser test loads report.html in headless
	# Chromium (--dump-dom) and checks the heatmap, tables and SVG plots are
	# in the DOM a real browser builds; without it that test only skips
	chromium
	# the toolchain root (scripts/toolroot.sh): mmdebstrap builds a trixie
	# root with QEMU 11.1, gcc-14 and clang-21, and fth runs them in it
	# through bwrap (--toolchain gcc-14|clang-21, --qemu 11.1) rather than
	# upgrading this machine's libc
	mmdebstrap bubblewrap
)

# fetch_source SERIES: Debian's linux-source-SERIES (apt's candidate: 7.x
# from trixie-backports, 6.12 from bookworm-security, 6.1 from bookworm),
# downloaded and unpacked under $SRC_ROOT, once.
fetch_source() {
	local series=$1
	local tarball="$SRC_ROOT/usr/src/linux-source-$series.tar.xz"
	local tree="$SRC_ROOT/linux-source-$series"
	if [ -f "$tree/Makefile" ] && [ -f "$tree/.fth-unpacked" ]; then
		log "kernel source already at $tree"
		return
	fi
	sudo_ mkdir -p "$SRC_ROOT"
	if [ ! -f "$tarball" ]; then
		log "downloading linux-source-$series"
		local tmp; tmp=$(mktemp -d)
		if ! (cd "$tmp" && apt-get download "linux-source-$series"); then
			rm -rf "$tmp"
			echo "deps: no package linux-source-$series in this machine's apt sources (apt-cache policy linux-source-$series); run make deps first for trixie-backports" >&2
			exit 1
		fi
		sudo_ dpkg-deb -x "$tmp"/linux-source-"$series"_*.deb "$SRC_ROOT"
		rm -rf "$tmp"
	fi
	log "unpacking $tarball"
	sudo_ rm -rf "$tree"
	sudo_ tar -C "$SRC_ROOT" -xf "$tarball"
	sudo_ touch "$tree/.fth-unpacked"
	log "kernel source ready at $tree"
}

main() {
	if [ "${1:-}" = source ]; then
		# `deps.sh source 6.12`: what `fth --kernel 6.12` runs on first use.
		[ -n "${2:-}" ] || { echo "usage: deps.sh source X.Y" >&2; exit 3; }
		fetch_source "$2"
		return
	fi
	add_backports
	log "apt-get update"
	# Unreachable third-party sources only warn; a broken Debian index is fatal below.
	sudo_ apt-get update -qq || true
	log "installing: ${PKGS[*]}"
	sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PKGS[@]}"
	for series in $KERNELS; do
		fetch_source "$series"
	done
	# Kept as it is when complete and built from the same package list.
	log "toolchain root"
	bash "$(dirname "$0")/toolroot.sh"
}

main "$@"
