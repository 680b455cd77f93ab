"""What the CLI prints: a redriven job's budget, an event's essentials, lists within 80 columns."""

from io import StringIO

from rich.console import Console

from streams.cli.tables import _attempts, _essentials, jobs_table, routes_table


def test_a_redriven_job_shows_the_budget_it_was_granted_again():
    totals = {"attempts": 2, "charged_attempts": 2, "budget_spent": 0}
    shown = _attempts({"totals": totals, "attempt_limit": 3})
    assert shown == "0 of 3 charged since its redrive (2 before)"
    fresh = {"attempts": 1, "charged_attempts": 1, "budget_spent": 1}
    assert _attempts({"totals": fresh, "attempt_limit": 3}) == "1 of 3 charged (1 recorded)"


def test_an_events_row_names_the_failure_the_retry_time_and_the_route():
    recorded = {
        "attempt": {
            "attempt_number": 2,
            "outcome": "HTTP_ERROR",
            "route": "DIRECT",
            "route_name": "direct",
            "http_status": 503,
            "from_cache": False,
            "failure": {"code": "HTTP_503"},
        }
    }
    assert _essentials(recorded) == "attempt 2 via direct: HTTP_ERROR; HTTP 503; HTTP_503"
    retry = {"attempt_number": 2, "next_attempt_at": "2026-12-01T10:00:05Z", "failure": {"code": "HTTP_503"}}
    assert _essentials(retry) == "attempt 2; HTTP_503; retry at 2026-12-01T10:00:05Z"


def test_a_list_fits_80_columns_without_cutting_the_short_id():
    job = {
        "job_id": "0123abcd-0000-5000-8000-000000000000",
        "state": "DEAD_LETTER",
        "job_type": "browser.render",
        "request": {"url": "https://example.com/" + "x" * 200},
        "accepted_at": "2026-12-01T10:00:00.000000Z",
    }
    out = StringIO()
    Console(file=out, width=80).print(jobs_table([job]))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "0123abcd" in lines[-1]


def test_a_route_that_is_not_metered_shows_no_zeros_and_says_why():
    route = {
        "name": "direct",
        "kind": "direct",
        "metered": False,
        "spent_in_period": "0",
        "budget": None,
        "remaining": None,
        "rate": 0,
        "reservations_outstanding": 0,
        "granted": 0,
        "denied": 0,
    }
    out = StringIO()
    Console(file=out, width=120).print(routes_table([route]))
    shown = out.getvalue()
    assert "not metered" in shown
    assert "0 (0 denied)" not in shown
    out = StringIO()
    Console(file=out, width=120).print(routes_table([route | {"metered": True, "granted": 7}]))
    assert "7 (0 denied)" in out.getvalue()
