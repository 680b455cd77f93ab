import ipaddress

import pytest

from streams.fetch.guard import AddressRefusedError, ResolutionError, is_public, resolve_checked


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
    ],
)
def test_private_loopback_link_local_cgnat_and_metadata_addresses_are_not_public(address):
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_global_unicast_addresses_are_public(address):
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "localhost", "0.0.0.0", "::1", "0x7f.1"])
async def test_loopback_spellings_are_refused_after_resolution(host):
    with pytest.raises(AddressRefusedError):
        await resolve_checked(host, 80, allow_private=False)


async def test_the_deployment_may_allow_private_addresses():
    assert await resolve_checked("127.0.0.1", 80, allow_private=True) == "127.0.0.1"


async def test_an_unresolvable_host_is_a_resolution_error():
    with pytest.raises(ResolutionError):
        await resolve_checked("no-such-host.invalid", 80, allow_private=False)
