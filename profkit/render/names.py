"""Kernel names a table cell can hold: the demangled C++ signature without the noise, keeping what tells kernels apart.

A demangled PyTorch kernel is 300-1,500 characters (`void at::native::elementwise_kernel<(int)128, (int)4, ...>(int,
T3)`), and one kernel name covers many template instantiations (add, GELU, copy): a name cut to its first or last
48 characters reads the same for all of them. display_name keeps the function's own name and its top-level template
arguments, drops namespaces, the return type, the parameter list and casts, and folds nested templates and lambdas;
names without templates (cuBLAS, cuDNN, nvjet: the tile shape is in the name) are kept whole. The full name goes
into the cell's title.
"""

from __future__ import annotations

import re

MAX_CHARS = 96
"""Longest display name of a template instantiation; a name without templates is kept whole (the longest cuDNN
names, tile suffixes included, are ~100 characters)."""

_NAMESPACE = re.compile(r"\b(?:[A-Za-z_]\w*|<unnamed>|\(anonymous namespace\))::")
_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|bool|char|short|long long|unsigned)\)(-?\w+)")
_LAMBDA = re.compile(r"\[lambda\([^\]]*\) \(instance \d+\)\]")


def _split_top(text: str, open_at: int) -> tuple[str, int]:
    """The text inside the bracket pair opening at open_at (nesting of <>, () and []), and the index after it."""
    depth, pairs = 0, {"<": ">", "(": ")", "[": "]"}
    closers = set(pairs.values())
    for i in range(open_at, len(text)):
        ch = text[i]
        if ch in pairs:
            depth += 1
        elif ch in closers:
            depth -= 1
            if depth == 0:
                return text[open_at + 1:i], i + 1
    return text[open_at + 1:], len(text)


def _top_args(inner: str) -> list[str]:
    """Top-level, comma-separated template arguments."""
    args, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(inner[start:i].strip())
            start = i + 1
    args.append(inner[start:].strip())
    return [a for a in args if a]


def _denoise(text: str) -> str:
    """Anonymous namespaces, lambdas (as λ), a lambda's enclosing function's parameters and call operators out."""
    text = text.replace("<unnamed>::", "").replace("(anonymous namespace)::", "")
    text = _LAMBDA.sub("λ", text)
    text = text.replace("::operator ()() const", "")
    text = re.sub(r"\([^()]*\)::", "::", text)
    return re.sub(r"(?:::λ)+", "·λ", text)  # "·": namespace stripping keeps the lambda's enclosing function


def _short_arg(arg: str) -> str:
    """One template argument: casts dropped, lambdas as λ, its own template arguments folded to <…>."""
    arg = _NAMESPACE.sub("", _denoise(re.sub(r"^void ", "", arg)))
    arg = _CAST.sub(r"\1", arg)
    head = arg.find("<")
    if head > 0:
        _, end = _split_top(arg, head)
        arg = arg[:head] + "<…>" + arg[end:]
    arg = re.sub(r"\([^()]*\)", "", arg) if "(" in arg and not arg.startswith("(") else arg
    return arg.strip() or "…"


def display_name(name) -> str:
    """A kernel name short enough for a table cell that still tells instantiations apart (module docstring)."""
    text = str(name or "").strip()
    if not text:
        return text
    text = _denoise(re.sub(r"^(?:void|static|__global__)\s+", "", text))
    head = min((i for i in (text.find("<"), text.find("(")) if i > 0), default=-1)
    if head < 0:
        base, rest = text, ""
    else:
        base, rest = text[:head], text[head:]
    base = _NAMESPACE.sub("", base).strip()
    shown = base
    if rest.startswith("<"):
        inner, _ = _split_top(rest, 0)
        args = [_short_arg(a) for a in _top_args(inner)]
        shown = f"{base}<{', '.join(args)}>"
    if len(shown) > MAX_CHARS and shown != base:
        shown = shown[:MAX_CHARS - 1].rstrip(", ") + "…"
    return shown
