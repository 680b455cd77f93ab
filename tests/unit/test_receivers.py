import asyncio

import pytest

from streams.web.pacing import ReceiverPacer, receiver_of, receivers_of


def test_every_spelling_of_one_receiving_host_is_one_receiver():
    spellings = ["127.0.0.1", "127.1", "0x7f.0.0.1", "0177.0.0.1", "127.0.0.1.", "[::ffff:127.0.0.1]"]
    assert {receiver_of(host) for host in spellings} == {"127.0.0.1"}
    assert receiver_of("Example.COM.") == receiver_of("example.com") == "example.com"
    assert receiver_of("bücher.example") == receiver_of("xn--bcher-kva.example")
    assert receiver_of("example.com") != receiver_of("example.org")


async def test_a_name_and_the_address_it_resolves_to_share_their_turns():
    pacer = ReceiverPacer()
    await pacer.turn("localhost", 3600)  # the first turn is now
    with pytest.raises(TimeoutError):  # 127.0.0.1 is the same receiver: its turn is an hour away
        async with asyncio.timeout(1):
            await pacer.turn("127.0.0.1", 3600)
    async with asyncio.timeout(30):
        await pacer.turn("127.0.0.2", 3600)  # another receiver's first turn is now too
    assert {"127.0.0.1", "localhost"} <= await receivers_of("localhost")
