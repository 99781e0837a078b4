"""Kubernetes name rules and stable shortening of derived names: a port of the Rust SDK's
`names` module (plugins/sdk/src/names.rs), so a Profile gets the very name the Flux plugin gives
its HelmRelease (and the Argo CD plugin its Application) for the same service.

Lengths are counted in UTF-8 bytes, as Rust's `str::len` does.
"""

import re

#: Longest DNS-1123 label (names of most objects, label values).
MAX_LABEL_LEN = 63
#: Longest DNS-1123 subdomain.
MAX_SUBDOMAIN_LEN = 253

_LABEL = re.compile(r"^[a-z0-9-]+$")


def is_dns1123_label(s):
    """Lower-case alphanumerics and `-`, starting and ending with an alphanumeric, <= 63."""
    return (
        isinstance(s, str)
        and 0 < len(s.encode()) <= MAX_LABEL_LEN
        and _LABEL.match(s) is not None
        and not s.startswith("-")
        and not s.endswith("-")
    )


def is_dns1123_subdomain(s):
    """Dot-separated DNS-1123 labels, at most 253 characters."""
    return (
        isinstance(s, str)
        and 0 < len(s.encode()) <= MAX_SUBDOMAIN_LEN
        and all(is_dns1123_label(part) for part in s.split("."))
    )


def fnv1a32(data):
    """32-bit FNV-1a: tiny, dependency-free and stable across platforms and versions."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def _hashed(full, max_len):
    """`full` cut to leave room for `-` and 8 hex characters of its hash (no `-` or `.` before it)."""
    data = full.encode()
    digest = "%08x" % fnv1a32(data)
    keep = max(0, max_len - (len(digest) + 1))
    prefix = data[:keep].decode("utf-8", errors="ignore").rstrip("-.")
    return "%s-%s" % (prefix, digest)


def service_object_name(service_set, service, max_len=MAX_LABEL_LEN):
    """`<service_set>.<service>`, of at most `max_len` bytes; a dotted service name or a longer
    name is cut and ends in `-` plus 8 hex characters of FNV-1a of the whole name."""
    full = "%s.%s" % (service_set, service)
    if len(full.encode()) <= max_len and "." not in service:
        return full
    return _hashed(full, max_len)


def derived_name(parts, max_len=MAX_LABEL_LEN):
    """`parts` joined with `-`, cut with a hash when longer than `max_len`."""
    full = "-".join(parts)
    return full if len(full.encode()) <= max_len else _hashed(full, max_len)
