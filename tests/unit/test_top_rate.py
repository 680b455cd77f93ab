"""`top`'s completion rate is measured, never the previous minute's bucket shown as the last minute's."""

from streams.cli.top import Rate


def overview(ended: int | None, recent_jobs: int = 10, completed_last_minute: int | None = 1) -> dict:
    cluster = None if ended is None else {"jobs": {"SUCCEEDED": ended, "PENDING": 5}}
    return {
        "cluster": cluster,
        "recent_jobs": recent_jobs,
        "recent_limit": 2000,
        "completed_last_minute": completed_last_minute,
    }


def test_a_reader_of_its_own_jobs_sees_the_jobs_that_ended_in_the_last_minute():
    assert Rate().shown(overview(None, completed_last_minute=1)) == "completions/s (last 60 s) 0.02"


def test_between_frames_the_rate_is_the_change_in_the_clusters_ended_jobs():
    rate = Rate()
    rate.shown(overview(100))
    shown = rate.shown(overview(100 + 184 * 0))  # nothing ended meanwhile
    assert shown.startswith("completions/s (last ")
    assert shown.endswith(" 0.00")


def test_without_every_recent_job_and_without_a_previous_frame_it_says_it_cannot_tell_yet():
    shown = Rate().shown(overview(None, recent_jobs=2000, completed_last_minute=None))
    assert "measured from the next frame" in shown
