"""How function and library names are normalized: the one place that decides which spellings are "the same".

* ``normalize_function``: the signature matcher's canonical symbol (no parameter list, ABI tags,
  clone suffixes, symbol versions; template arguments kept);
* ``normalize_native_name``: a bucket / call-tree label, also without template arguments and addresses;
* ``short_function`` / ``wait_name``: table look-ups (grouping's idle-wait lists);
* ``split_library`` (and ``library_base`` / ``library_version``): a library file name's basename
  without its version and the version it carries (``libnccl.so.2.21.5`` -> ``libnccl.so``, "2.21.5").

Names come from cores and pasted text, so every pattern here must stay linear on hostile input.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import List, Optional, Tuple

from hanganalyze import rxcache
from hanganalyze.cnames import last_group_start

# --------------------------------------------------------------------------------------------
# Function names
# --------------------------------------------------------------------------------------------

# A match may only start where a whitespace run starts ((?<!\s)), else each of 20,000 spaces
# would start a new scan of the run; the clone-suffix chain is searched in the name's tail only.
_CLONE_BRACKET = rxcache.compile(r"(?<!\s)\s*\[clone [^\]]*\]")
_ABI_TAG = rxcache.compile(r"\[abi:[^\]]*\]")
_CLONE_SUFFIX = rxcache.compile(r"(?:\.(?:isra|constprop|part|cold|lto_priv|localalias|clone)(?:\.\d+)?)+$")
_CLONE_SUFFIX_TAIL = 256  # longest suffix chain looked at (real ones are a few dozen characters)
_SYMVER = rxcache.compile(r"@{1,2}[A-Za-z0-9_.]+$")
#: (a qualifier is a word of its own: ``join_noexcept`` and ``is_const`` keep their names)
_TRAILING_QUALS = rxcache.compile(r"(?<!\s)(?:\s*(?:(?<!\w)(?:const|volatile|noexcept)|&&|&))+$")


def _strip_clone_suffix(n: str) -> str:
    """``f.isra.0.cold`` -> ``f``, looking at the last _CLONE_SUFFIX_TAIL characters only."""
    tail = n[-_CLONE_SUFFIX_TAIL:]
    m = _CLONE_SUFFIX.search(tail)
    return n[: len(n) - len(tail) + m.start()] if m else n


def normalize_function(name: Optional[str]) -> str:
    """Canonical form of a native or Python function name: no parameter list, no ``[abi:cxx11]``,
    no clone suffixes (``.isra.0``, ``.cold``, ``[clone .constprop.0]``), no ``@plt``/symbol
    version.  Unknown names become ``"??"``.  Template arguments are kept (glob them if needed)."""
    if not name:
        return "??"
    n = name.strip()
    if not n or n == "??":
        return "??"
    n = _CLONE_BRACKET.sub("", n)
    n = _ABI_TAG.sub("", n)
    n = _SYMVER.sub("", n)
    n = _TRAILING_QUALS.sub("", n).rstrip()
    if n.endswith(")"):
        open_at = n.rfind("(")
        if n.count(")", open_at) == 1 and open_at > 0 and not n[:open_at].endswith("operator"):
            # the common case: one flat parameter list at the end, e.g. "f(int, char const*)"
            n = n[:open_at].rstrip()
            n = _TRAILING_QUALS.sub("", n).rstrip()
            return _strip_clone_suffix(n) or "??"
        i = last_group_start(n)
        if i is not None:
            head = n[:i].rstrip()
            # "(anonymous namespace)" alone or "operator()" are names, not parameter lists
            if head and not head.endswith("operator"):
                n = head
            elif head.endswith("operator") and i + 2 < len(n):
                n = n[:i + 2] if n[i:i + 2] == "()" else head
        n = _TRAILING_QUALS.sub("", n).rstrip()
    n = _strip_clone_suffix(n)
    return n or "??"


_HEX = rxcache.compile(r"0x[0-9a-fA-F]+")
_OPERATORS = ("operator()", "operator<<=", "operator>>=", "operator<<", "operator>>", "operator<=",
              "operator>=", "operator<", "operator>", "operator->*", "operator->")


def _strip_balanced(s: str, open_ch: str, close_ch: str) -> str:
    out: List[str] = []
    depth = 0
    for ch in s:
        if ch == open_ch:
            depth += 1
        elif ch == close_ch and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


#: A Go method's receiver between its package and its name (``.(*Mutex).``, ``.(Handler).``).
_GO_RECEIVER = re.compile(r"\.\(\*?[A-Za-z_]\w{0,100}(?:\[[\w.,\s*]{0,100}\])?\)\.")


@lru_cache(maxsize=1 << 16)  # a job repeats the same few thousand names (analyze/intern.py)
def normalize_native_name(name: str) -> str:
    """``ns::Foo<int>::bar(int, char*) const [clone .isra.0]`` -> ``ns::Foo::bar``.

    ``normalize_function`` decides which spellings are one symbol (parameter lists, ``[abi:…]``,
    clone suffixes, symbol versions); a bucket or call-tree label also drops template arguments
    and addresses, which differ between builds of the same code."""
    s = normalize_function(name)
    s = s.replace("(anonymous namespace)", "{anon}")
    protected = {}
    for i, op in enumerate(_OPERATORS):
        if op in s:
            token = "\x00%d\x00" % i
            protected[token] = op
            s = s.replace(op, token)
    for i, recv in enumerate(sorted(set(_GO_RECEIVER.findall(s))) if ".(" in s else ()):
        token = "\x00g%d\x00" % i  # a Go method's receiver, ``sync.(*Mutex).Lock``: part of the name
        protected[token] = recv
        s = s.replace(recv, token)
    s = _strip_balanced(s, "<", ">")
    s = _strip_balanced(s, "(", ")")
    for token, op in protected.items():
        s = s.replace(token, op)
    s = re.sub(r"\s+const\b.*$", "", s)
    s = _HEX.sub("", s.strip())
    return " ".join(s.split())


def short_function(name: Optional[str]) -> str:
    """Function name without C++ parameter list, for table look-ups."""
    if not name:
        return ""
    return name.split("(", 1)[0].strip()


@lru_cache(maxsize=1 << 16)
def wait_name(name: Optional[str]) -> str:
    """``__GI___poll`` -> ``poll``, ``__libc_accept`` -> ``accept``, ``___pthread_cond_wait`` ->
    ``pthread_cond_wait``: glibc exports the same call under several aliases."""
    base = short_function(name)
    stripped = re.sub(r"^(?:__GI_)?_*(?:libc_)?", "", base)
    if stripped.endswith("_nocancel"):
        stripped = stripped[: -len("_nocancel")]
    return stripped


#: glibc's internal aliases of one exported symbol: ``__GI___poll``, ``___pthread_mutex_lock``,
#: ``__libc_recv``, ``__pthread_join``, ``__dl_iterate_phdr`` (each release renames a few).
_GLIBC_ALIAS = rxcache.compile(r"^(?:__GI_+|_{2,3})(?:libc_)?(?=[a-z])")


@lru_cache(maxsize=1 << 16)
def glibc_alias(name: str) -> str:
    """The exported spelling of a glibc-internal alias (``__GI___dl_iterate_phdr`` ->
    ``dl_iterate_phdr``, ``___pthread_mutex_lock`` -> ``pthread_mutex_lock``), the name unchanged
    otherwise.  Matchers compare both spellings, so a signature written with the exported name
    matches a frame printed under its alias (and one naming the alias still matches it exactly).
    ``name`` is already normalized (``normalize_function``: no ``.isra.N``, ``@plt``, ``@@GLIBC_*``)."""
    if not name.startswith("_") or "::" in name:
        return name
    out = _GLIBC_ALIAS.sub("", name, count=1)
    return out or name


def basename(path: Optional[str]) -> str:
    """The last component of a source or library path (``/`` or ``\\`` separated)."""
    if not path:
        return ""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


# --------------------------------------------------------------------------------------------
# Library file names
# --------------------------------------------------------------------------------------------

#: ``libnccl.so.2.21.5``: the shortest ``*.so`` prefix followed by dots and digits only.
_SO_SUFFIX = rxcache.compile(r"^(.*?\.so)\.([\d.]+)$")
#: ``libfoo-1.2.so``: a version before the ``.so`` (the file has no unversioned spelling).
_DASH_VERSION = rxcache.compile(r"-(\d+(?:\.\d+)+)\.so$")
_DOTTED = rxcache.compile(r"^\d+(?:\.\d+)*$")


def split_library(path: Optional[str]) -> Tuple[str, Optional[str]]:
    """(basename without the version, the version the file name carries):
    ``/usr/lib/libnccl.so.2.21.5`` -> ("libnccl.so", "2.21.5"), ``libc.so.6`` -> ("libc.so", "6"),
    ``libfoo-1.2.so`` -> ("libfoo-1.2.so", "1.2"), ``libtorch.so`` -> ("libtorch.so", None)."""
    if not path:
        return "", None
    base = path.rsplit("/", 1)[-1]
    m = _SO_SUFFIX.match(base)
    if m:
        return m.group(1), (m.group(2) if _DOTTED.match(m.group(2)) else None)
    m = _DASH_VERSION.search(base)
    return base, (m.group(1) if m else None)


def library_base(path: Optional[str]) -> str:
    """``/usr/lib/libnccl.so.2.21.5`` -> ``libnccl.so``."""
    return split_library(path)[0]


def library_version(path: Optional[str]) -> Optional[str]:
    """Version from a library file name: ``libnccl.so.2.26.5`` -> "2.26.5", ``libfoo-1.2.so`` -> "1.2"."""
    return split_library(path)[1]
