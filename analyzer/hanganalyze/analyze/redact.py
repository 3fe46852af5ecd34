"""``--redact``: replace personal and secret data in every field of a snapshot with stable placeholders.

Reports get pasted into public issues.  Redaction runs on the Snapshot (before rendering), so every
format - HTML, Markdown, JSON, text - shows the same placeholders: ``<user1>``, ``<host1>``,
``<ip1>``, ``<secret1>``.  The same value always gets the same placeholder within one report, so a
reader can still see that two paths belong to the same user or two ranks to the same host.

Two passes over every string of the snapshot:

1. *discover* values that must go everywhere they appear: user names from home paths
   (``/home/NAME``, ``/Users/NAME``, ``/homes/NAME`` - also inside other paths, e.g.
   ``/tmp/x/home/NAME/``), ``USER=``/``LOGNAME=`` settings, e-mail addresses, the analyzing
   machine's host name and login name, and secrets: the value after a secret-looking flag
   (``--token=V``, ``--password V``, ``--api-key V``), ``NAME_KEY=V``/``*TOKEN*=V``/``*SECRET*=V``/
   ``*PASSWORD*=V`` settings, credentials in URLs (``https://u:p@host``), ``Bearer V`` and well-known
   token shapes (``hf_``, ``ghp_``, ``sk-``, ``AKIA``, ``xox?-``);
2. *replace* those values wherever they occur (a token that also shows up in a thread name is
   caught there too), then IPv4/IPv6 addresses and FQDN-looking host names.

Decisions where the issue was silent:

* ``/root`` and the user ``root`` are kept: they name nobody and hide every pyenv/venv path;
* loopback and unspecified addresses (127.0.0.0/8, 0.0.0.0, ::, ::1) are kept;
* a host name needs three or more labels and a known top-level or private suffix, so Python
  dotted names (``torch.distributed.run``) and file names (``libc.so.6``) survive; well-known
  public project domains (github.com, pytorch.org, ...) are kept;
* signature-supplied fields (``references``, ``signature``) and enum fields are not touched.
"""

from __future__ import annotations

import getpass
import ipaddress
import re
import socket
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from hanganalyze_gdbext.model import Snapshot

KINDS = ("secret", "user", "host", "ip")

#: Keys whose values come from us (signature DB, enums, tool), never from the user's machine.
UNTOUCHED_KEYS = frozenset({"schema", "bucket", "tool", "references", "signature", "severity", "kind", "merge", "gil"})

_SECRET_WORD = r"(?:token|passw(?:or)?d|pwd|secret|api[-_]?key|access[-_]?key|private[-_]?key|auth|credentials?)"
#: An argv element that is only a flag name (the secret word is looked for separately, see
#: ``is_secret_flag``: one regex for both backtracks quadratically on ``-token-token...=x``).
FLAG_NAME = re.compile(r"--?[\w.-]*")
# These patterns run on untrusted core strings (a 100 KB thread name, argv), so each must be linear.
# "A flag or setting name containing a secret word" as one regex backtracks over every word
# occurrence from every start inside a run of name characters: 50 KB of ``a-a-a-`` in a thread name
# took minutes.  So runs of name characters are found once (a look-behind keeps a match from starting
# inside a run), and the word and the value are checked on each run in code, with the same result.
_FLAG_RUN = re.compile(r"(?<![\w.-])[\w.-]+")
#: After a secret flag: ``=`` or spaces, then the value (``--token=V`` / ``--password V``).
FLAG_VALUE = re.compile(r"(=|\s+)([^\s'\"]+)")
_SETTING_RUN = re.compile(r"(?<![A-Za-z0-9_.])[A-Za-z0-9_.]+(?==)")
_NOT_SETTING_START = re.compile(r"[\w-]")
#: After a secret setting name: ``=`` and the value (``HF_TOKEN=V``, ``DB_PASSWORD=V``, ``MY_KEY=V``).
SETTING_VALUE = re.compile(r"=([^\s'\"]+)")
SECRET_WORD = re.compile(_SECRET_WORD, re.IGNORECASE)
SETTING_WORD = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def is_secret_flag(a: str) -> bool:
    """An argv element that is only a secret flag (``--password``, ``-api-key``): the next element
    is the secret.  Two linear checks: a flag name, holding a secret word."""
    return FLAG_NAME.fullmatch(a) is not None and SECRET_WORD.search(a) is not None


def inline_flag_secrets(s: str) -> Iterator[str]:
    """Values of ``--token=V`` / ``--password V`` (a flag: a dash and the rest of its run of
    ``[\\w.-]``, holding a secret word, then ``=`` or spaces)."""
    pos = 0
    for m in _FLAG_RUN.finditer(s):
        if m.start() < pos:
            continue  # inside the previous value
        dash = m.group(0).find("-")
        if dash < 0 or not SECRET_WORD.search(m.group(0), dash):
            continue
        v = FLAG_VALUE.match(s, m.end())
        if v:
            pos = v.end()
            yield v.group(2)


def setting_secrets(s: str) -> Iterator[str]:
    """Values of ``NAME=V`` settings whose name holds KEY/TOKEN/SECRET/PASSWORD/CREDENTIAL (a name:
    ``[A-Za-z0-9_.]`` not preceded by a word character or a dash, or starting after a dot)."""
    pos = 0
    for m in _SETTING_RUN.finditer(s):
        if m.start() < pos:
            continue
        start = m.start()
        if start > 0 and _NOT_SETTING_START.match(s[start - 1]):
            dot = s.find(".", start, m.end())
            if dot < 0:
                continue
            start = dot + 1
        if start >= m.end() or not SETTING_WORD.search(s, start, m.end()):
            continue
        v = SETTING_VALUE.match(s, m.end())
        if v:
            pos = v.end()
            yield v.group(1)
URL_CREDENTIALS = re.compile(r"(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://)([^\s/:@'\"]+):([^\s/@'\"]+)@", re.IGNORECASE)
BEARER = re.compile(r"\b(Bearer|Basic|token)\s+([A-Za-z0-9._~+/=-]{8,})")
TOKEN_SHAPES = re.compile(
    r"(?<![\w-])(hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|glpat-[A-Za-z0-9_-]{16,})"
)
HOME_USER = re.compile(r"/(?:home|Users|homes|usr/home|export/home)/([^/\s'\"<>:;,=()\[\]{}]+)")
USER_SETTING = re.compile(r"\b(?:USER|LOGNAME|USERNAME|SUDO_USER)=([^\s'\"/]+)")
EMAIL = re.compile(r"(?<![\w.+:/-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
IPV4 = re.compile(r"(?<![\w.])((?:\d{1,3}\.){3}\d{1,3})(?![\w]|\.\d)")
IPV6 = re.compile(r"(?<![\w:.])([0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%[\w]+)?)(?![\w:])")
FQDN = re.compile(
    r"(?<![\w.@/-])((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){2,}([A-Za-z]{2,24}))(?![\w-]|\.\w)"
)

#: Cheap pre-check for ``Redactor.discover`` (lower-case substrings): a string containing none of
#: these holds nothing to learn, and most strings (function names, library paths) contain none.
DISCOVERY_HINTS = (
    "/home/", "/users/", "/homes/", "=", "@", "://", "bearer", "basic", "token", "passw", "pwd", "secret", "key",
    "auth", "cred", "hf_", "gh", "github_pat_", "sk-", "akia", "xox", "glpat-", " -",
)


def _has_hint(s: str) -> bool:
    low = s.lower()
    return low.startswith("-") or any(h in low for h in DISCOVERY_HINTS)


#: Suffixes a host name in a report plausibly ends with (public TLDs seen in clusters + private ones).
HOST_SUFFIXES = frozenset(
    {"com", "net", "org", "edu", "gov", "mil", "int", "io", "ai", "dev", "cloud", "app", "tech", "co", "us", "uk",
     "de", "fr", "jp", "cn", "kr", "in", "ca", "au", "nl", "ch", "se", "fi", "no", "eu", "ru", "br", "it", "es",
     "il", "sg", "tw", "local", "internal", "lan", "corp", "home", "intranet", "private", "localdomain", "cluster",
     "svc", "site", "cc", "info", "biz", "me"}
)
#: Public project domains that name nobody (kept so that references in text stay useful).
PUBLIC_DOMAINS = frozenset(
    {"github.com", "gitlab.com", "githubusercontent.com", "pytorch.org", "python.org", "nvidia.com",
     "tensorflow.org", "google.com", "googleapis.com", "readthedocs.io", "pypi.org", "huggingface.co",
     "stackoverflow.com", "microsoft.com", "debian.org", "ubuntu.com", "kernel.org", "gnu.org", "jax.dev",
     "sourceware.org", "anaconda.org", "conda.io", "numpy.org"}
)
KEEP_USERS = frozenset({"root", "nobody", "user", "runner", "shared", "linuxbrew", "Shared", "Guest"})
#: Machine host names too generic to replace everywhere (``main`` would eat every ``main ()`` frame).
KEEP_HOSTS = frozenset({"localhost", "main", "master", "work", "worker", "server", "host", "node", "debian", "ubuntu",
                        "python", "train", "gpu", "box", "test", "dev", "build", "default", "container"})


class Redactor:
    """Holds the value -> placeholder tables of one report."""

    def __init__(self, hostnames: Iterable[str] = (), users: Iterable[str] = ()):
        self.tables: Dict[str, Dict[str, str]] = {k: {} for k in KINDS}
        self._literal: Optional[re.Pattern] = None
        self._seen: set = set()
        self._replaced: Dict[str, str] = {}
        for h in hostnames:
            self.add("host", h)
        for u in users:
            self.add_user(u)

    # -- tables -------------------------------------------------------------------------------
    def add(self, kind: str, value: str) -> str:
        table = self.tables[kind]
        if value not in table:
            for other in KINDS:  # a value already known under another kind keeps that placeholder
                if value in self.tables[other]:
                    return self.tables[other][value]
            table[value] = "<%s%d>" % (kind, len(table) + 1)
            self._literal = None
        return table[value]

    def add_user(self, name: str) -> None:
        if name and len(name) >= 2 and name not in KEEP_USERS and not name.startswith("<"):
            self.add("user", name)

    def add_secret(self, value: str) -> None:
        value = value.strip()
        if len(value) >= 3 and not value.startswith("<"):
            self.add("secret", value)

    # -- pass 1 -------------------------------------------------------------------------------
    def discover(self, s: str) -> None:
        # Most strings (function names, library paths) carry none of the hints: one scan decides.
        if s in self._seen or not _has_hint(s):
            return
        self._seen.add(s)
        for m in HOME_USER.finditer(s):
            self.add_user(m.group(1))
        for m in USER_SETTING.finditer(s):
            self.add_user(m.group(1))
        for m in EMAIL.finditer(s):
            self.add("user", m.group(0))
        for value in inline_flag_secrets(s):
            self.add_secret(value)
        for value in setting_secrets(s):
            self.add_secret(value)
        for m in URL_CREDENTIALS.finditer(s):
            self.add_user(m.group(2))
            self.add_secret(m.group(3))
        for m in BEARER.finditer(s):
            self.add_secret(m.group(2))
        for m in TOKEN_SHAPES.finditer(s):
            self.add_secret(m.group(1))

    def discover_list(self, items: List[Any]) -> None:
        """argv-like lists: ``["--password", "hunter2"]`` makes the second element a secret."""
        for a, b in zip(items, items[1:]):
            if isinstance(a, str) and isinstance(b, str) and is_secret_flag(a) and not b.startswith("-"):
                self.add_secret(b)

    # -- pass 2 -------------------------------------------------------------------------------
    def _literal_re(self) -> Optional[re.Pattern]:
        if self._literal is None:
            values = sorted({v for k in KINDS for v in self.tables[k]}, key=len, reverse=True)
            if not values:
                return None
            alts = "|".join(re.escape(v) for v in values)
            self._literal = re.compile(r"(?<![A-Za-z0-9])(?:%s)(?![A-Za-z0-9])" % alts)
        return self._literal

    def _lookup(self, value: str) -> str:
        for k in KINDS:
            if value in self.tables[k]:
                return self.tables[k][value]
        return value

    def replace(self, s: str) -> str:
        """Pass 2 for one string (cached: frames repeat the same paths and names many times)."""
        done = self._replaced.get(s)
        if done is None:
            done = self._replaced[s] = self._replace(s)
        return done

    def _replace(self, s: str) -> str:
        lit = self._literal_re()
        if lit is not None:
            s = lit.sub(lambda m: self._lookup(m.group(0)), s)
        s = IPV4.sub(self._ipv4, s)
        s = IPV6.sub(self._ipv6, s)
        s = FQDN.sub(self._fqdn, s)
        return s

    def _ipv4(self, m: re.Match) -> str:
        text = m.group(1)
        try:
            ip = ipaddress.IPv4Address(text)
        except ValueError:
            return text
        if ip.is_loopback or ip.is_unspecified:
            return text
        return self.add("ip", text)

    def _ipv6(self, m: re.Match) -> str:
        text = m.group(1)
        if text.count(":") < 2 or not re.search(r"\d", text):
            return text
        try:
            ip = ipaddress.IPv6Address(text.split("%", 1)[0])
        except ValueError:
            return text
        if ip.is_loopback or ip.is_unspecified:
            return text
        return self.add("ip", text)

    def _fqdn(self, m: re.Match) -> str:
        name, tld = m.group(1), m.group(2).lower()
        if tld not in HOST_SUFFIXES:
            return name
        labels = name.lower().split(".")
        if ".".join(labels[-2:]) in PUBLIC_DOMAINS or ".".join(labels[-3:]) in PUBLIC_DOMAINS:
            return name
        return self.add("host", name)

    def summary(self) -> str:
        counts = ["%d %s%s" % (len(self.tables[k]), k, "s" * (len(self.tables[k]) != 1)) for k in KINDS]
        return "redacted: " + ", ".join(counts)


def _walk(obj: Any, fn: Callable[[str], str], on_list: Optional[Callable[[List[Any]], None]] = None) -> Any:
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, list):
        if on_list is not None:
            on_list(obj)
        return [_walk(x, fn, on_list) for x in obj]
    if isinstance(obj, dict):
        return {k: (v if k in UNTOUCHED_KEYS else _walk(v, fn, on_list)) for k, v in obj.items()}
    return obj


def machine_identity() -> Tuple[List[str], List[str]]:
    """This machine's host names and login name (no DNS lookups: redaction must work offline)."""
    hosts = []
    try:
        h = socket.gethostname()
        for name in (h, h.split(".", 1)[0]):
            if len(name) >= 4 and name.lower() not in KEEP_HOSTS and name not in hosts:
                hosts.append(name)
    except OSError:
        pass
    users = []
    try:
        users.append(getpass.getuser())
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        pass
    return hosts, users


def redact(snapshot: Snapshot, hostnames: Optional[Iterable[str]] = None, users: Optional[Iterable[str]] = None
           ) -> Snapshot:
    """A new Snapshot with personal data and secrets replaced in every string field."""
    if hostnames is None or users is None:
        mh, mu = machine_identity()
        hostnames = mh if hostnames is None else hostnames
        users = mu if users is None else users
    r = Redactor(hostnames, users)
    data = snapshot.to_dict()
    for p in snapshot.processes:  # the job view's host names are hosts even when they are short ("node07")
        hosts = (p.dist.host, p.dist.master_addr) if p.dist is not None else ()
        if p.coredump is not None:  # systemd-coredump's record
            hosts += (p.coredump.hostname,)
        for value in hosts:
            if value is not None and len(value) >= 2 and value.lower() not in ("localhost", "127.0.0.1", "::1"):
                r.add("host", value)

    def seen(s: str) -> str:
        r.discover(s)
        return s

    _walk(data, seen, r.discover_list)
    clean = _walk(data, r.replace)
    out = Snapshot.from_dict(clean)
    out.warnings.append(r.summary())
    return out
