"""Callbacks are retried durably as events: isolated from each other, surviving a restart."""

from __future__ import annotations

from uuid import uuid4

import httpx
import pytest

from schemas.events import CallbackRetryScheduled
from streams.worker import Worker
from tests.commands import run
from tests.e2e.conftest import observed_system, running_system, worker_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings_for(broker, path, **overrides):
    values = {"callback_timeout_s": 1.0, "callback_max_elapsed_s": 30.0, "callback_retry_base_s": 0.3}
    return worker_settings(broker.bootstrap, path, **(values | overrides))


async def test_a_slow_receiver_does_not_hold_back_another_callback(broker, tmp_path, origin):
    async with running_system(settings_for(broker, tmp_path)) as system:
        slow_hook, fast_hook = f"/slowhook/{uuid4().hex}", f"/hook/0/{uuid4().hex}"
        slow = await system.submit(origin.url("/page/slow-callback"), callback_url=origin.url(slow_hook))
        await system.completion(slow)
        await system.events.wait_for(lambda _: origin.callbacks[slow_hook])
        fast = await system.submit(origin.url("/page/fast-callback"), callback_url=origin.url(fast_hook))
        # The slow receiver still holds its first try while the other callback is delivered.
        await system.events.wait_for(lambda _: "CallbackDelivered" in system.event_kinds(fast))
        assert "CallbackDelivered" not in system.event_kinds(slow)
        # Its try ends at the timeout, and the next one is scheduled; then the receiver recovers.
        await system.events.wait_for(lambda _: "CallbackRetryScheduled" in system.event_kinds(slow))
        retried = next(e for e in system.events.of_job(slow) if isinstance(e, CallbackRetryScheduled))
        assert "TIMEOUT" in retried.last_error
        origin.release.set()
        await system.events.wait_for(lambda _: "CallbackDelivered" in system.event_kinds(slow))


async def test_a_name_that_does_not_resolve_is_retried_until_the_window_closes(broker, tmp_path, origin):
    settings = settings_for(broker, tmp_path, callback_max_elapsed_s=2.0)
    async with running_system(settings) as system:
        job_id = await system.submit(
            origin.url("/page/dns"), callback_url="http://no-such-receiver.invalid/h"
        )
        await system.events.wait_for(
            lambda _: "CallbackAbandoned" in system.event_kinds(job_id), timeout_s=30
        )
        kinds = system.event_kinds(job_id)
        assert kinds.count("CallbackRetryScheduled") >= 1
        abandoned = next(e for e in system.events.of_job(job_id) if type(e).__name__ == "CallbackAbandoned")
        assert abandoned.last_error.startswith("DNS_FAILED")


async def test_the_next_callback_try_survives_a_restart_of_the_worker(broker, tmp_path, origin):
    settings = settings_for(broker, tmp_path, callback_retry_base_s=2.0)
    hook = f"/hook/1/{uuid4().hex}"
    first = Worker(settings)
    await first.start()
    async with observed_system(settings, first) as system:
        try:
            job_id = await system.submit(origin.url("/page/restart-callback"), callback_url=origin.url(hook))
            await system.events.wait_for(lambda _: "CallbackRetryScheduled" in system.event_kinds(job_id))
        finally:
            await first.stop()
        assert len(origin.callbacks[hook]) == 1
        second = Worker(settings)
        await second.start()
        try:
            await system.events.wait_for(lambda _: "CallbackDelivered" in system.event_kinds(job_id))
        finally:
            await second.stop()
    assert len(origin.callbacks[hook]) == 2
    assert len({headers["webhook-id"] for headers, _ in origin.callbacks[hook]}) == 1


async def test_each_callback_try_is_listed_with_its_answer_latency_and_error(broker, tmp_path, origin):
    async with running_system(settings_for(broker, tmp_path)) as system:
        assert system.worker is not None
        base_url = f"http://127.0.0.1:{system.worker.web_port}"
        hook = f"/hook/2/{uuid4().hex}"  # 500 twice, then 204
        job_id = await system.submit(origin.url("/page/callback-log"), callback_url=origin.url(hook))
        failing = await system.submit(
            origin.url("/page/callback-fails"), callback_url=origin.url("/hook/99/x")
        )
        await system.events.wait_for(lambda _: "CallbackRetryScheduled" in system.event_kinds(failing))
        code, shown = await run("get", str(failing), "--url", base_url, cwd=tmp_path)
        assert code == 0, shown
        (callback,) = [line for line in shown.splitlines() if line.strip().startswith("callback ")]
        said = (
            "failed (HTTP 500)",
            "abandoned after try",
            "failed, HTTP 500)",
        )  # the last answer, or the one before a retry in flight
        assert any(words in callback for words in said), callback
        await system.events.wait_for(lambda _: "CallbackDelivered" in system.event_kinds(job_id))
        code, shown = await run("get", str(job_id), "--url", base_url, cwd=tmp_path)
        assert "delivered, HTTP 204 (try 3)" in shown
        async with httpx.AsyncClient(base_url=base_url) as http:
            tries = (await http.get(f"/jobs/{job_id}/callbacks")).json()["items"]
    assert [(item["try_number"], item["outcome"]) for item in tries] == [
        (1, "failed"),
        (2, "failed"),
        (3, "delivered"),
    ]
    assert len({item["webhook_id"] for item in tries}) == 1
    assert all("500" in item["error"] and item["next_try_at"] for item in tries[:2])
    assert [item["http_status"] for item in tries] == [500, 500, 204]
    assert tries[2]["http_status"] == 204
    assert tries[2]["callback_url"] == origin.url(hook)
    assert all(item["latency_ms"] >= 0 and item["answered_at"] >= item["sent_at"] for item in tries)
    assert [headers["webhook-id"] for headers, _ in origin.callbacks[hook]] == [tries[0]["webhook_id"]] * 3
