"""Python source that byte-compiles like library code: real functions, classes and docstrings.

Why: byte compilation is most of an install on fast storage (torch's 2,371 modules, 47.7 MB
of source, cost more CPU than unpacking its 12,000 files), and its cost depends on what the
source is: dense code (calls, branches, comprehensions, literals) costs far more per byte
than docstrings and comments, which the compiler barely looks at. A synthetic module is
therefore written as a mix of both: ``code_fraction`` of its bytes are code blocks
(functions with branches, loops, try/except and f-strings; classes with methods and
properties; module-level tables of literals), the rest is docstring prose. A profile
measures the fraction that makes generated source compile at the real source's rate
(``compile_rates``), so the same fraction holds on any machine.

Method: every block is drawn from a seeded ``random.Random`` and a fixed vocabulary, so a
seed gives the same bytes everywhere. Identifiers are two vocabulary words, so the text
deflates about as well as real code does. A module ends with a comment line that pads it
to the exact size asked for.
"""

from __future__ import annotations

import keyword
import marshal
import random
import time
from collections.abc import Callable

_ALL_WORDS = (
    "tensor shape value index module layer weight bias input output batch size dim axis "
    "kernel stride padding device dtype grad state buffer param config cache node graph "
    "edge op call arg kwarg result name key item count total offset scale factor mode "
    "level rank group stream event handle context scope frame block chunk slice view "
    "storage memory format layout order stage step epoch loss metric sample token vocab "
    "embed hidden head mask attn query proj norm eps alpha beta gamma delta rate decay "
    "momentum path file line source target type kind spec meta info flag option default "
    "schema field column row table record entry list dict tuple set map queue stack heap "
    "tree walk visit apply reduce gather scatter split merge concat stack expand squeeze "
    "reshape permute transpose flatten cast convert check verify assert validate parse "
    "emit trace record hook guard lock timer clock timeout retry backend frontend handler "
    "dispatch register lookup resolve export import load save dump read write open close"
).split()
_WORDS = tuple(w for w in _ALL_WORDS if not keyword.iskeyword(w))
_TYPES = ("int", "float", "str", "bytes", "list", "dict", "tuple", "set", "bool")
_ERRORS = ("ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError", "AttributeError")
_PROSE = (
    "the of and to a in is that for it as with be on by this are from or an at which not "
    "returns given when if each all must may can should will used default optional see "
    "note example raises args keyword argument tensor value shape input output module"
).split()


class _ModuleRandom(random.Random):
    """A module's own random stream, with its vocabulary."""

    words: list[str]
    names: list[str]
    phrases: list[str]


def _name(rng: _ModuleRandom) -> str:
    return rng.choice(rng.names)


_INTS = ("0", "1", "2", "-1", "3", "4", "8", "16", "32", "64", "128", "256", "1024", "4096")
_FLOATS = ("0.0", "1.0", "0.5", "1e-05", "1e-06", "0.1", "0.9", "2.0", "0.02", "1e-12")


def _literal(rng: _ModuleRandom) -> str:
    pick = rng.random()
    if pick < 0.3:
        return rng.choice(_INTS)
    if pick < 0.5:
        return rng.choice(_FLOATS)
    if pick < 0.8:
        return repr(f"{rng.choice(rng.words)}.{rng.choice(rng.words)}")
    return rng.choice(("None", "True", "False", "()"))


def _sentence(rng: _ModuleRandom) -> str:
    """A line of prose: a module's few stock phrases recombined, as its comments repeat themselves."""
    return " ".join(rng.choices(rng.phrases, k=4))


def _doc(rng: _ModuleRandom, size: int, indent: str) -> str:
    """A docstring of about ``size`` bytes: lines of prose, wrapped at 80 columns."""
    lines = [f"{rng.choice(rng.words).capitalize()} {' '.join(rng.choices(rng.words, k=5))}."]
    n = len(lines[0]) + 8
    while n < size:
        line = _sentence(rng)
        lines.append(line)
        n += len(line) + len(indent) + 1
    body = f"\n{indent}".join(lines)
    return f'{indent}"""{body}\n{indent}"""\n'


_MAX_DOC = 1200  # docstrings stay short, as real ones do; more prose goes into comments


def _prose(rng: _ModuleRandom, size: int, head: str, indent: str) -> str:
    """``head`` (a def or class line) with ``size`` bytes of prose: comments above it, a docstring below."""
    if size <= 0:
        return head
    doc = min(size, _MAX_DOC)
    above = size - doc
    comments = ""
    if above > 0:
        outer = indent[:-4]
        lines = []
        while above > 0:
            line = _sentence(rng)
            lines.append(f"{outer}# {line}\n")
            above -= len(lines[-1])
        comments = "".join(lines)
    return comments + head + _doc(rng, doc, indent)


def _function(rng: _ModuleRandom, indent: str, doc_ratio: float, method: bool = False) -> str:
    a, b, c, x = _name(rng), _name(rng), _name(rng), _name(rng)
    while len({a, b, c, x}) < 4:  # arguments must differ
        b, c, x = _name(rng), _name(rng), _name(rng)
    i = rng.choice("ijkn")
    args = ("self, " if method else "") + f"{a}, {b}=None, *, {c}={_literal(rng)}"
    inner = indent + "    "
    body = [
        f"{inner}if {a} is None:\n{inner}    {a} = {_literal(rng)}\n",
        f"{inner}elif isinstance({a}, ({rng.choice(_TYPES)}, {rng.choice(_TYPES)})):\n"
        f"{inner}    {x} = [{i} * {rng.choice(_INTS)} for {i} in range({rng.choice(_INTS)}) if {i} % 2]\n",
        f"{inner}for {i} in range(len({b} or ())):\n"
        f"{inner}    try:\n"
        f"{inner}        {x} = {a}.{rng.choice(rng.words)}({i}, key={_literal(rng)}, {c}={c})\n"
        f"{inner}    except ({rng.choice(_ERRORS)}, {rng.choice(_ERRORS)}) as exc:\n"
        f'{inner}        raise {rng.choice(_ERRORS)}(f"{rng.choice(rng.words)} {{{a}!r}} {rng.choice(_PROSE)} {{exc}}") from exc\n',
    ]
    if rng.random() < 0.5:
        body.append(
            f"{inner}while {x} and {c} > {rng.randrange(0, 9)}:\n{inner}    {c} -= 1\n{inner}    {x} = {x}[1:]\n"
        )
    if rng.random() < 0.5:
        k1, k2 = rng.choice(rng.words), rng.choice(rng.words)
        body.append(f"{inner}{x} = {{{k1!r}: {a}, {k2!r}: ({b}, {c}), 'n': len(str({a}))}}\n")
    body.append(
        f"{inner}return {x} if {a} else {{{rng.choice(rng.words)!r}: {_literal(rng)}, 'args': ({a}, {b})}}\n"
    )
    code = "".join(body)
    head = f"{indent}def {_name(rng)}({args}):\n"
    return _prose(rng, int(len(code) * doc_ratio), head, inner) + code + "\n"


def _class(rng: _ModuleRandom, doc_ratio: float) -> str:
    name = "".join(w.capitalize() for w in (rng.choice(rng.words), rng.choice(rng.words)))
    base = rng.choice(("object", "Exception", "dict"))
    attr = _name(rng)
    init = (
        f"    def __init__(self, {attr}={_literal(rng)}, **kwargs):\n"
        f"        self.{attr} = {attr}\n"
        f"        self._opts = {{k: v for k, v in kwargs.items() if not k.startswith('_')}}\n\n"
        f"    @property\n    def {_name(rng)}(self):\n        return self._opts.get({rng.choice(rng.words)!r}, self.{attr})\n\n"
    )
    methods = "".join(
        _function(rng, "    ", doc_ratio, method=True) for _ in range(rng.randrange(1, 4))
    )
    head = f"class {name}({base}):\n"
    return _prose(rng, int(len(init) * doc_ratio), head, "    ") + f"{init}{methods}\n"


def _table(rng: _ModuleRandom) -> str:
    items = ", ".join(
        f"{rng.choice(rng.words)!r}: ({_literal(rng)}, {_literal(rng)})"
        for _ in range(rng.randrange(3, 12))
    )
    return f"{_name(rng).upper()} = {{{items}}}\n\n"


def _block(rng: _ModuleRandom, doc_ratio: float) -> str:
    pick = rng.random()
    if pick < 0.55:
        return _function(rng, "", doc_ratio)
    if pick < 0.9:
        return _class(rng, doc_ratio)
    return _table(rng)


def module_source(size: int, code_fraction: float, rng: random.Random, head: str = "") -> bytes:
    """A valid module of exactly ``size`` bytes (at least ``head``), ``code_fraction`` of it code."""
    # a module uses a few dozen words over and over, as real code does (so it deflates alike)
    rng = _ModuleRandom(rng.getrandbits(64))
    rng.words = rng.sample(_WORDS, 32)
    rng.names = [f"{rng.choice(rng.words)}_{rng.choice(rng.words)}" for _ in range(24)]
    rng.phrases = [
        " ".join(
            rng.choice(_PROSE) if rng.random() < 0.7 else rng.choice(rng.words) for _ in range(3)
        )
        for _ in range(16)
    ]
    f = min(1.0, max(0.02, code_fraction))
    doc_ratio = (1.0 - f) / f
    parts = [head]
    n = len(head)
    # the module docstring carries the prose share of the head and of what the padding adds
    if size - n > 400:
        parts.append(_doc(rng, int(min(size - n, 2000) * (1 - f) * 0.5), "") + "\n")
        n += len(parts[-1])
    code = 0.0  # bytes of code so far (a block's share is 1 / (1 + doc_ratio))
    misses = 0
    while misses < 4:
        # a block that does not fit is replaced by a small table while the code share is
        # short of ``f``; otherwise the rest is comment padding (prose)
        small = misses > 0
        if small and code >= f * n:
            break
        block = _table(rng) if small else _block(rng, doc_ratio)
        if n + len(block) + 2 > size:
            misses += 1
            continue
        parts.append(block)
        n += len(block)
        code += len(block) if small else len(block) / (1 + doc_ratio)
        misses = 0
    text = "".join(parts).encode()
    return text + _comment_pad(size - len(text), rng)


def _comment_pad(pad: int, rng: _ModuleRandom) -> bytes:
    """Exactly ``pad`` bytes of comment lines (79 columns at most)."""
    if pad <= 0:
        return b""
    out = []
    while pad > 0:
        width = min(pad, 80)
        if pad - width == 1:  # never leave a single byte: it could only be a bare newline
            width -= 1
        if width == 1:
            out.append("\n")
        else:
            words = " ".join(_sentence(rng) for _ in range(width // 40 + 1))
            out.append("#" + words[: width - 2] + "\n")
        pad -= width
    return "".join(out).encode()


def _compile_cpu_s(sources: list[bytes]) -> float:
    """CPU seconds to compile and marshal ``sources``: what compileall does per file, less the I/O."""
    t0 = time.process_time()
    for i, src in enumerate(sources):
        marshal.dumps(compile(src, f"<ref{i}>", "exec", dont_inherit=True))
    return time.process_time() - t0


def compile_rate(sources: list[bytes], repeats: int = 3) -> float:
    """CPU seconds per MB to compile and marshal ``sources`` on this interpreter (best of ``repeats``)."""
    size = sum(len(s) for s in sources)
    if size == 0:
        return 0.0
    return min(_compile_cpu_s(sources) for _ in range(repeats)) / (size / 1e6)


_FRACTIONS = (0.02, 0.1, 0.25, 0.5, 0.75, 1.0)


def reference_rates(sizes: list[int] | None = None, seed: int = 0) -> list[tuple[float, float]]:
    """(code fraction, compile CPU s/MB) of generated modules of ``sizes`` on this machine.

    ``sizes`` should be a sample of the real modules' sizes: small modules are mostly the
    padding comment, so how fast a fraction compiles depends on the size mix.
    """
    rng = random.Random(seed)
    sizes = sizes or [12_500] * 40
    return [
        (f, compile_rate([module_source(n, f, rng) for n in sizes], repeats=2)) for f in _FRACTIONS
    ]


def code_fraction_for(
    rate: float, rates: Callable[[], list[tuple[float, float]]] = reference_rates
) -> float:
    """The code fraction whose generated source compiles at ``rate`` CPU s/MB.

    Interpolated between the measured points of ``rates()`` (made monotonic first: a noisy
    point never makes the answer jump back); outside them, the nearest end.
    """
    points = sorted(rates())
    best = 0.0
    mono = []
    for f, r in points:
        best = max(best, r)
        mono.append((f, best))
    if rate <= mono[0][1]:
        return mono[0][0]
    for (f0, r0), (f1, r1) in zip(mono, mono[1:]):
        if r0 <= rate <= r1:
            return round(f1 if r1 == r0 else f0 + (f1 - f0) * (rate - r0) / (r1 - r0), 3)
    return mono[-1][0]


__all__ = ["code_fraction_for", "compile_rate", "module_source", "reference_rates"]
