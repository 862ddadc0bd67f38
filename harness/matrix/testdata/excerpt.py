#!/usr/bin/env python3
"""Copy Kconfig entries verbatim from a Linux tree into the fixture tree here.

usage: python3 excerpt.py /var/cache/fth/src/linux-source-7.3 linux-7.3.4
(the plan below says which entries; run it from harness/matrix/testdata)."""
import os, re, sys
src, dst = sys.argv[1], sys.argv[2]
KW = re.compile(r'^(config|menuconfig|choice|endchoice|if|endif|menu|endmenu|source|comment|mainmenu)\b')

def block(lines, start):
    """Lines of the entry starting at index start, up to the next top-level keyword."""
    out = [lines[start]]
    i = start + 1
    while i < len(lines) and not KW.match(lines[i]):
        out.append(lines[i]); i += 1
    while out and out[-1].strip() == '':
        out.pop()
    return out

def find(lines, pat):
    for i, l in enumerate(lines):
        if re.match(pat, l):
            return i
    raise SystemExit(f"no {pat}")

# path -> list of items: ("sym", NAME) copies that entry, ("line", regex) copies one line,
# ("range", a, b) copies 1-based lines a..b.
plan = {
    "Makefile": [("range", 1, 6)],
    "Kconfig": [("line", r'^source "init/Kconfig"'), ("line", r'^source "lib/Kconfig.debug"')],
    "init/Kconfig": [("sym", "CC_IS_GCC"), ("sym", "CC_IS_CLANG"), ("sym", "AS_IS_GNU"), ("sym", "AS_IS_LLVM"), ("sym", "LD_IS_LLD"), ("line", r'^source "kernel/Kconfig.preempt"'), ("range", 1658, 1675), ("sym", "EXPERT"), ("line", r'^source "arch/Kconfig"')],
    "kernel/Kconfig.preempt": [("range", 1, 10**9)],
    "arch/Kconfig": [("line", r'^source "arch/\$\(SRCARCH\)/Kconfig"'), ("sym", "ARCH_SUPPORTS_CFI"), ("sym", "CFI"), ("sym", "ARCH_NO_PREEMPT"), ("sym", "ARCH_SUPPORTS_RT"), ("sym", "HAVE_PREEMPT_DYNAMIC"), ("sym", "HAVE_PREEMPT_DYNAMIC_CALL"), ("sym", "HAVE_PREEMPT_DYNAMIC_KEY")],
    "lib/Kconfig.debug": [("line", r'^source "kernel/trace/Kconfig"')],
    "kernel/trace/Kconfig": [("sym", "HAVE_FUNCTION_TRACER"), ("sym", "HAVE_DYNAMIC_FTRACE"), ("sym", "HAVE_DYNAMIC_FTRACE_WITH_REGS"),
        ("sym", "HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS"), ("sym", "HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS"), ("sym", "HAVE_DYNAMIC_FTRACE_WITH_ARGS"),
        ("sym", "FTRACE"), ("line", r'^if FTRACE$'), ("sym", "FUNCTION_TRACER"), ("sym", "DYNAMIC_FTRACE"), ("sym", "DYNAMIC_FTRACE_WITH_REGS"),
        ("sym", "DYNAMIC_FTRACE_WITH_DIRECT_CALLS"), ("sym", "DYNAMIC_FTRACE_WITH_CALL_OPS"), ("sym", "DYNAMIC_FTRACE_WITH_ARGS"), ("line", r'^endif # FTRACE')],
    "arch/x86/Kconfig": [("sym", "64BIT"), ("sym", "X86_32"), ("sym", "X86_64"), ("sym", "X86")],
    "arch/arm64/Kconfig": [("sym", "ARM64"), ("sym", "CLANG_SUPPORTS_DYNAMIC_FTRACE_WITH_ARGS"), ("sym", "GCC_SUPPORTS_DYNAMIC_FTRACE_WITH_ARGS")],
    "arch/riscv/Kconfig": [("sym", "64BIT"), ("sym", "RISCV"), ("sym", "CLANG_SUPPORTS_DYNAMIC_FTRACE"), ("sym", "GCC_SUPPORTS_DYNAMIC_FTRACE"), ("sym", "MMU")],
    "arch/powerpc/Kconfig": [("sym", "64BIT"), ("sym", "PPC")],
}
for path, items in plan.items():
    lines = open(os.path.join(src, path)).read().split('\n')
    out, where = [], []
    for it in items:
        if it[0] == "sym":
            i = find(lines, r'^(menu)?config %s$' % it[1])
            b = block(lines, i)
            where.append(f"{i+1}-{i+len(b)}")
            out += b + ['']
        elif it[0] == "line":
            i = find(lines, it[1])
            where.append(str(i + 1))
            out += [lines[i], '']
        else:
            a, b = it[1], min(it[2], len(lines))
            out += lines[a-1:b] + ([''] if it[2] <= len(lines) else [])
            where.append("all" if it[2] > len(lines) else f"{a}-{b}")
    p = os.path.join(dst, path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    text = '\n'.join(out).rstrip('\n') + '\n'
    if path != "Makefile" and where != ["all"]:
        text = f"# Excerpt of Linux 7.3.4 {path}, copied verbatim: lines {', '.join(where)}.\n\n" + text
    open(p, 'w').write(text)
    print(path, where)
