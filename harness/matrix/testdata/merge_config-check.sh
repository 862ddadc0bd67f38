#!/bin/bash
# How testdata/merge_config-7.3.4.txt was measured: configure only (allnoconfig
# plus fragments, about 10 s), never build, and report every requested value
# that did not survive.
#
# usage: merge_config-check.sh <arch> <label> <fragment>...   (base and arch/<arch> come first)
# env:   KERNEL_SRC (default /var/cache/fth/src/linux-source-7.3), KCONFIGS (default: the repo's)
set -u
arch=$1; label=$2; shift 2
K=${KCONFIGS:-$(cd "$(dirname "$0")/../../../kconfigs" && pwd)}
SRC=${KERNEL_SRC:-/var/cache/fth/src/linux-source-7.3}
out=${TMPDIR:-/tmp}/fth-mx-$arch-$label
rm -rf "$out"; mkdir -p "$out"
case $arch in
  x86_64) env=(ARCH=x86_64) ;;
  arm64) env=(ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-) ;;
  riscv64) env=(ARCH=riscv LLVM=-19) ;;
  ppc64le) env=(ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu-) ;;
  *) echo "unknown arch $arch" >&2; exit 2 ;;
esac
files=()
for f in base "arch/$arch" "$@"; do files+=("$K/$f"); done
(cd "$SRC" && env "${env[@]}" scripts/kconfig/merge_config.sh -n -O "$out" "${files[@]}" >"$out/merge.log" 2>&1) ||
	{ echo "merge_config failed:"; tail "$out/merge.log"; exit 1; }
python3 - "$out/.config" "${files[@]}" <<'PY'
import re, sys
def settings(path):
    for l in open(path):
        l = l.strip()
        m = re.match(r'^CONFIG_(\w+)=(.*)$', l) or re.match(r'^# CONFIG_(\w+) is (not set)$', l)
        if m:
            yield m.group(1), 'n' if m.group(2) == 'not set' else m.group(2)
final = dict(settings(sys.argv[1]))
want = {}
for f in sys.argv[2:]:
    want.update(settings(f))
bad = [f"{k}: want {v} got {final.get(k, 'n')}" for k, v in want.items() if final.get(k, 'n') != v]
print("OK" if not bad else "MISMATCH", len(want), "requested;", " ".join(bad))
PY
