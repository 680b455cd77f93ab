"""Each job's view as the API renders it: cached per state, linked to its trace."""

from __future__ import annotations

from collections import OrderedDict
from uuid import UUID

from projections.jobstore import Listed
from projections.views import JobView, listed_view, own_view

VIEW_CACHE_SIZE = 10_000


class JobViews:
    """Each job's view as JSON, rendered once per state (its sequence)."""

    def __init__(self, trace_url_template: str | None = None) -> None:
        self._rendered: OrderedDict[tuple[UUID, bool], tuple[int, bytes]] = OrderedDict()
        self._trace_url_template = trace_url_template

    def json(self, job: Listed, own: bool = False) -> bytes:
        """The view; `own`: as a principal reading only its own jobs sees it (`views.own_view`)."""
        cached = self._rendered.get((job.job_id, own))
        if cached is not None and cached[0] == job.sequence:
            return cached[1]
        view = self.linked(listed_view(job))
        rendered = (own_view(view) if own else view).model_dump_json().encode()
        self._rendered[(job.job_id, own)] = (job.sequence, rendered)
        if len(self._rendered) > VIEW_CACHE_SIZE:
            self._rendered.popitem(last=False)
        return rendered

    def linked(self, view: JobView) -> JobView:
        """The view with its trace's link in the deployment's trace viewer, when one is set."""
        if self._trace_url_template is None or view.trace_id is None:
            return view
        return view.model_copy(
            update={"trace_url": self._trace_url_template.replace("{trace_id}", view.trace_id)}
        )
