"""The public topics' promises to other teams: the records each holds and how their schemas may change.

A submit topic's schemas change only BACKWARD_TRANSITIVE (workers read what any older producer
wrote); the topics others consume change only FORWARD_TRANSITIVE (any older consumer reads what
workers write). Subjects follow Confluent's TopicNameStrategy for each topic's main record and
TopicRecordNameStrategy for every record it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.registry import NAMESPACE


@dataclass(frozen=True)
class TopicContract:
    topic: str  # its name after the topic prefix
    records: tuple[str, ...]  # the first is the one `<topic>-value` names
    compatibility: str
    written_by_workers: bool  # consumers read it: written in the registry framing when there is one

    def subjects(self, topic_name: str) -> list[tuple[str, str]]:
        """Each subject of this topic (named for `topic_name`) and the record it holds."""
        by_record = [(f"{topic_name}-{NAMESPACE}.{record}", record) for record in self.records]
        return [(f"{topic_name}-value", self.records[0]), *by_record]


PUBLIC_TOPICS = (
    TopicContract(
        "submit",
        (
            "SubmitJob",
            "CancelJob",
            "RedriveJob",
            "DeleteJobHistory",
            "ReplayCallback",
            "ReportRemoteAttempt",
            "CreateMonitor",
            "EditMonitor",
            "PauseMonitor",
            "ResumeMonitor",
            "DeleteMonitor",
        ),
        "BACKWARD_TRANSITIVE",
        written_by_workers=False,
    ),
    TopicContract("completions", ("JobCompleted",), "FORWARD_TRANSITIVE", written_by_workers=True),
    TopicContract("answers", ("SubmissionAnswer",), "FORWARD_TRANSITIVE", written_by_workers=True),
    TopicContract("dead-input", ("DeadInput",), "FORWARD_TRANSITIVE", written_by_workers=True),
    TopicContract("changes", ("MonitorChange",), "FORWARD_TRANSITIVE", written_by_workers=True),
)
# Versions frozen before their topic's rule was promised (the first release's completion, before
# the REJECTED status): exempt from the rule's check, never written again.
BEFORE_THE_PROMISE = frozenset({"JobCompleted.05cde55d4f195b9b"})
