"""Which IP addresses scrapestream refuses to contact: an explicit table, not `ipaddress.is_global`.

Sources: the IANA IPv4 and IPv6 Special-Purpose Address Registries, plus cloud metadata
endpoints. Every IPv6 form that carries an IPv4 address (mapped, compatible, translated,
NAT64, 6to4, Teredo, ISATAP) is unwrapped and the IPv4 address is checked as well.
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

NON_PUBLIC_IPV4: dict[str, str] = {
    "0.0.0.0/8": "this network",
    "10.0.0.0/8": "private",
    "100.64.0.0/10": "carrier-grade NAT (and Alibaba's metadata 100.100.100.200)",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local (cloud metadata 169.254.169.254)",
    "172.16.0.0/12": "private",
    "192.0.0.0/24": "IETF protocol assignments",
    "192.0.2.0/24": "documentation (TEST-NET-1)",
    "192.31.196.0/24": "AS112",
    "192.52.193.0/24": "AMT",
    "192.88.99.0/24": "6to4 relay anycast (deprecated)",
    "192.168.0.0/16": "private",
    "192.175.48.0/24": "AS112 direct delegation",
    "198.18.0.0/15": "benchmarking",
    "198.51.100.0/24": "documentation (TEST-NET-2)",
    "203.0.113.0/24": "documentation (TEST-NET-3)",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved (and limited broadcast 255.255.255.255)",
    "168.63.129.16/32": "Azure platform metadata (WireServer)",
}

NON_PUBLIC_IPV6: dict[str, str] = {
    "::/128": "unspecified",
    "::1/128": "loopback",
    "::/96": "IPv4-compatible (deprecated)",
    "100::/64": "discard-only",
    "2001::/23": "IETF protocol assignments (but Teredo, 2001::/32, is unwrapped below)",
    "2001:db8::/32": "documentation",
    "3fff::/20": "documentation",
    "5f00::/16": "segment routing SIDs",
    "64:ff9b:1::/48": "local-use IPv4/IPv6 translation",
    "fc00::/7": "unique local (AWS metadata fd00:ec2::254)",
    "fe80::/10": "link-local",
    "fec0::/10": "site-local (deprecated)",
    "ff00::/8": "multicast",
}

_IPV4_TABLE = tuple(ipaddress.IPv4Network(network) for network in NON_PUBLIC_IPV4)
_IPV6_TABLE = tuple(ipaddress.IPv6Network(network) for network in NON_PUBLIC_IPV6)
_TEREDO = ipaddress.IPv6Network("2001::/32")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_ISATAP_IDS = (0x00005EFE, 0x02005EFE)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 transition form carries."""
    value = int(address)
    low32 = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _IPV4_COMPATIBLE or address in _IPV4_TRANSLATED or address in _NAT64:
        found.append(low32)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address in _TEREDO and address.teredo is not None:
        found.extend(address.teredo)
    if (value >> 32) & 0xFFFFFFFF in _ISATAP_IDS:
        found.append(low32)
    return found


def refusal_reason(address: IPAddress) -> str | None:
    """Why `address` may not be contacted, or None when it is public."""
    if isinstance(address, ipaddress.IPv4Address):
        for v4, (text, label) in zip(_IPV4_TABLE, NON_PUBLIC_IPV4.items(), strict=True):
            if address in v4:
                return f"{address} is {label} ({text})"
        return None
    for v6, (text, label) in zip(_IPV6_TABLE, NON_PUBLIC_IPV6.items(), strict=True):
        if address in v6 and not (v6.prefixlen == 23 and address in _TEREDO):
            return f"{address} is {label} ({text})"
    for inner in embedded_ipv4(address):
        reason = refusal_reason(inner)
        if reason is not None:
            return f"{address} carries {reason}"
    return None


def is_public(address: IPAddress) -> bool:
    return refusal_reason(address) is None
