"""A listing's pages as JSON: public pages, and the shards one worker gives another."""

from __future__ import annotations

import json
from typing import Any

from projections.readindex import Page

Shard = Page[bytes]  # items are (position, the item's JSON)


def item_json(item: Any) -> bytes:
    return json.dumps(item, separators=(",", ":")).encode()


def page_json(page: Shard, cursor: str | None) -> bytes:
    """A public page: `{"items": [...], "next_cursor": ...}`, from items already in JSON."""
    return (
        b'{"items":['
        + b",".join(item for _, item in page.items)
        + b'],"next_cursor":'
        + item_json(cursor)
        + b"}"
    )


def shard_json(owned: list[int], page: Shard) -> bytes:
    """An internal shard page, with the partitions it covers and each item's position."""
    items = b",".join(b'["' + at.encode() + b'",' + item + b"]" for at, item in page.items)
    return (
        b'{"partitions":'
        + item_json(owned)
        + b',"items":['
        + items
        + b'],"resume_after":'
        + item_json(page.resume_after)
        + b"}"
    )
