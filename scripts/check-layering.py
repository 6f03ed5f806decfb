#!/usr/bin/env python3
"""No upward include: a module of src/ (and its public headers under include/qjoule/) includes only the
headers of its own module and of the modules listed before it in docs/architecture.md's module table
(io first, cli last). A module's sub-folder with its own row (`model/calibration`) is a band of its own,
in the table's order; a sub-folder of such a module without a row is a problem too (it would sit in no
band). Prints each offending include as FILE:LINE: MODULE includes HEADER of MODULE
(listed below it), and exits 1 if there is one.

Parse once: outside src/quant/, a precision spec's text is parsed (quant::parse_format_spec) only where
it enters from a command line (TEXT_ENTERS below); a sweep file or a record read back makes a
quant::Precision, and everything below hands the typed FormatSpec down. Another caller is a problem too.

Kernel choices in one place: src/kernels and src/model read no QJOULE_ variable with getenv but through
the table of include/qjoule/kernels/kernel_overrides.h.

  scripts/check-layering.py [REPO_ROOT]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)

# The module table: rows "| `io` | ..." and "| `kernels/cpu`, `kernels/cuda` | ..." in order; modules of
# one row share a layer.
layer_of = {}
table = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
layer = 0
in_table = False
for line in table.splitlines():
    if line.startswith("| module |"):
        in_table = True
        continue
    if in_table:
        if not line.startswith("|"):
            break
        first = line.split("|")[1]
        names = re.findall(r"`([a-z_/]+)`", first)
        if not names:
            continue
        for name in names:
            layer_of[name] = layer
        layer += 1
if not layer_of:
    sys.exit(f"check-layering: no module table ('| module |') in {root / 'docs/architecture.md'}")
top = layer  # what the table does not list (the Python module) sits above it


def module_of(parts):
    """The module of a path below src/ or include/qjoule/ (a list of its parts), or None."""
    if not parts:
        return None
    if len(parts) >= 2 and f"{parts[0]}/{parts[1]}" in layer_of:
        return f"{parts[0]}/{parts[1]}"
    if parts[0] in layer_of:
        return parts[0]
    if parts[0] == "kernels":  # include/qjoule/kernels/*.h: the kernels' shared interface
        return "kernels/cpu"
    return None


def layer(module):
    return layer_of.get(module, top)


include = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Kernel choices in one place: a QJOULE_ variable read with getenv in src/kernels or src/model is a kernel
# choice of its own; it belongs in the table of include/qjoule/kernels/kernel_overrides.h.
reads_qjoule_variable = re.compile(r'getenv\s*\(\s*"(QJOULE_[A-Z0-9_]+)"')
NOT_KERNEL_CHOICES = {"QJOULE_CUBLASLT_LIB"}  # where a library is loaded from, not which kernel runs
OVERRIDES_TABLE = "src/kernels/cpu/kernel_overrides.cpp"
parses_spec = re.compile(r'\b(try_)?parse_format_spec\s*\(')
TEXT_ENTERS = {"src/cli/quant_options.cpp"}  # the flags of eval, ppl, generate (--precision, --layer-precision)
problems = []
# Modules split into bands (a row `model/x` beside `model`): every sub-folder of theirs must have a row.
for parent in sorted({n.split("/")[0] for n in layer_of if "/" in n and n.split("/")[0] in layer_of}):
    for base in (root / "src" / parent, root / "include" / "qjoule" / parent):
        for sub in sorted(d for d in base.iterdir() if d.is_dir()) if base.is_dir() else []:
            if f"{parent}/{sub.name}" not in layer_of:
                problems.append(
                    f"{sub.relative_to(root)}: a folder of {parent} with no row in docs/architecture.md's module "
                    f"table (each folder of {parent} is a band: give it a row where it belongs)")
for base, strip in ((root / "src", 1), (root / "include" / "qjoule", 2)):
    for path in sorted(base.rglob("*")):
        if path.suffix not in (".h", ".hpp", ".cpp", ".cu", ".cuh", ".inc") or not path.is_file():
            continue
        rel = path.relative_to(root).parts[strip:]
        here = module_of(list(rel)) or rel[0]
        relative = path.relative_to(root).as_posix()
        for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if (here != "quant" and relative not in TEXT_ENTERS
                    and not text.lstrip().startswith("//") and parses_spec.search(text)):
                problems.append(
                    f"{relative}:{number}: parses a precision spec's text; parse it where it enters "
                    f"({', '.join(sorted(TEXT_ENTERS))}, or a quant::Precision) and hand the FormatSpec down")
            if (relative.startswith(("src/kernels/", "src/model/")) and relative != OVERRIDES_TABLE
                    and not text.lstrip().startswith("//")
                    and any(v not in NOT_KERNEL_CHOICES for v in reads_qjoule_variable.findall(text))):
                problems.append(
                    f"{relative}:{number}: reads a QJOULE_ variable with getenv; a kernel choice is a row of "
                    f"include/qjoule/kernels/kernel_overrides.h, read through kernel_override()")
            m = include.match(text)
            if not m:
                continue
            parts = m.group(1).split("/")
            if parts[0] == "qjoule":
                parts = parts[1:]
            if len(parts) < 2:  # qjoule/error.h, qjoule/build_info.h: for everyone
                continue
            there = module_of(parts)
            if there is None or there == here:
                continue
            if layer(there) > layer(here):
                problems.append(
                    f"{path.relative_to(root)}:{number}: {here} includes {m.group(1)} of {there} "
                    f"(listed below {here} in docs/architecture.md's module table)")
for p in problems:
    print(p)
if problems:
    print(f"check-layering: {len(problems)} problem(s)")
    sys.exit(1)
print(f"check-layering: no upward include ({len(layer_of)} modules), precision specs parsed where they enter, "
      f"kernel choices read from one table")
