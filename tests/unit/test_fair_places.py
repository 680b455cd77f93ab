"""A worker's fetch places between callers: one caller never holds them all, and a freed place goes to
the waiting caller that holds fewest."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.agents.fair_places import FairPlaces


async def holding(places: FairPlaces, caller: str, held: list[str], release: asyncio.Event) -> None:
    async with places.held(caller):
        held.append(caller)
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_one_caller_with_more_work_than_places_leaves_the_reserve_to_another():
    places, held, release = FairPlaces(8, 0.75), [], asyncio.Event()
    hog = [asyncio.create_task(holding(places, "hog", held, release)) for _ in range(20)]
    await settle()
    assert held.count("hog") == 6
    other = asyncio.create_task(holding(places, "other", held, release))
    await settle()
    assert held.count("other") == 1
    release.set()
    await asyncio.gather(*hog, other)
    assert held.count("hog") == 20


@pytest.mark.asyncio
async def test_a_freed_place_goes_to_the_waiting_caller_holding_fewest():
    places, order = FairPlaces(2, 1.0), []
    gates = {name: asyncio.Event() for name in ("a1", "a2", "a3", "b1")}

    async def run(caller: str, name: str) -> None:
        async with places.held(caller):
            order.append(name)
            await gates[name].wait()

    tasks = [asyncio.create_task(run("a", name)) for name in ("a1", "a2", "a3")]
    await settle()
    tasks.append(asyncio.create_task(run("b", "b1")))
    await settle()
    assert order == ["a1", "a2"]
    gates["a1"].set()
    await settle()
    assert order == ["a1", "a2", "b1"]  # b holds none, a one: b first, although a3 waited longer
    for gate in gates.values():
        gate.set()
    await asyncio.gather(*tasks)
    assert order[-1] == "a3"


@pytest.mark.asyncio
async def test_a_waiter_stopped_before_its_turn_leaves_no_place_taken():
    places, held, release = FairPlaces(1, 1.0), [], asyncio.Event()
    first = asyncio.create_task(holding(places, "a", held, release))
    await settle()
    stopped = asyncio.create_task(holding(places, "b", held, release))
    await settle()
    stopped.cancel()
    release.set()
    await asyncio.gather(first, stopped, return_exceptions=True)
    again = asyncio.create_task(holding(places, "b", held, release))
    await asyncio.wait_for(again, 5)
    assert held == ["a", "b"]


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 6),
    share=st.floats(0.1, 1.0),
    callers=st.lists(st.sampled_from("abcd"), min_size=1, max_size=30),
)
def test_no_caller_ever_holds_more_than_its_share_and_every_work_gets_a_place(size, share, callers):
    async def scenario() -> None:
        places = FairPlaces(size, share)
        now: dict[str, int] = {}
        most: dict[str, int] = {}
        total = [0, 0]

        async def run(caller: str) -> None:
            async with places.held(caller):
                now[caller] = now.get(caller, 0) + 1
                total[0] += 1
                most[caller] = max(most.get(caller, 0), now[caller])
                total[1] = max(total[1], total[0])
                await asyncio.sleep(0)
                now[caller] -= 1
                total[0] -= 1

        await asyncio.wait_for(asyncio.gather(*(run(caller) for caller in callers)), 10)
        assert all(count <= places.per_caller for count in most.values())
        assert total[1] <= size

    asyncio.run(scenario())
