import ipaddress

import pytest

from streams.fetch.addresses import NON_PUBLIC_IPV4, NON_PUBLIC_IPV6, is_public, refusal_reason
from streams.fetch.guard import AddressRefusedError, ResolutionError, resolve_checked


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.1.2.3",
        "0.0.0.0",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "100.64.0.1",
        "169.254.169.254",
        "224.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "2002:7f00:1::",
        "ff02::1",
        "192.0.0.8",
        "192.0.0.170",
        "198.18.0.1",
        "100.100.100.200",
        "168.63.129.16",
        "192.0.2.1",
        "240.0.0.1",
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::808:808",  # local-use NAT64, whatever it carries
        "::10.0.0.1",  # IPv4-compatible
        "::8.8.8.8",  # IPv4-compatible is deprecated whatever it carries
        "::ffff:0:10.0.0.1",  # IPv4-translated
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo to 192.0.2.45
        "2a00:1450:4001::5efe:a00:1",  # ISATAP interface carrying 10.0.0.1
        "2001:db8::1",
        "3fff::1",
        "100::1",
        "fec0::1",
    ],
)
def test_non_public_addresses_and_every_transition_form_carrying_one_are_refused(address):
    assert not is_public(ipaddress.ip_address(address))
    assert refusal_reason(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8
        "2002:808:808::1",  # 6to4 of 8.8.8.8
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo between two public addresses
    ],
)
def test_global_unicast_addresses_are_public(address):
    assert is_public(ipaddress.ip_address(address))


def test_the_deny_table_is_explicit_and_documented():
    assert all(label for label in {**NON_PUBLIC_IPV4, **NON_PUBLIC_IPV6}.values())
    assert "64:ff9b:1::/48" in NON_PUBLIC_IPV6
    assert "192.0.0.0/24" in NON_PUBLIC_IPV4


async def test_an_allowed_network_lets_exactly_its_addresses_through():
    allowed = (ipaddress.ip_network("127.0.0.0/8"),)
    assert (
        await resolve_checked("127.0.0.1", 80, allow_private=False, allowed_networks=allowed) == "127.0.0.1"
    )
    with pytest.raises(AddressRefusedError):
        await resolve_checked("::1", 80, allow_private=False, allowed_networks=allowed)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "localhost", "0.0.0.0", "::1", "0x7f.1"])
async def test_loopback_spellings_are_refused_after_resolution(host):
    with pytest.raises(AddressRefusedError):
        await resolve_checked(host, 80, allow_private=False)


async def test_the_deployment_may_allow_private_addresses():
    assert await resolve_checked("127.0.0.1", 80, allow_private=True) == "127.0.0.1"


async def test_an_unresolvable_host_is_a_resolution_error():
    with pytest.raises(ResolutionError):
        await resolve_checked("no-such-host.invalid", 80, allow_private=False)


def test_the_documented_table_is_the_table_the_guard_uses():
    from pathlib import Path

    page = (Path(__file__).parent.parent.parent / "docs" / "SECURITY.md").read_text()
    for cidr, label in {**NON_PUBLIC_IPV4, **NON_PUBLIC_IPV6}.items():
        assert f"| `{cidr}` | {label} |" in page
