"""The HTTP/1.1 connection the API serves on: uvicorn's httptools protocol with the bounds it lacks.

Before a request is authenticated its head is anyone's: a head longer than `MAX_HEAD_BYTES` is
answered 414 (still in the URL) or 431 and the connection closed, before it is read whole; a
connection must finish each head within the head timeout of its first byte (and start one within
it of opening); a body must keep arriving (the head timeout between pieces) and end within the
body timeout. Each is answered 408 and closed. A response sent before its request's body ended
(a 401 to an upload) closes the connection rather than read the rest.
"""

from __future__ import annotations

import asyncio
import http

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 32 * 1024
LINGER_S = 2.0


def guarded_http(head_timeout_s: float, body_timeout_s: float) -> type[GuardedHttp]:
    """The protocol class uvicorn instantiates per connection, with these timeouts."""
    return type(
        "GuardedHttp", (GuardedHttp,), {"head_timeout_s": head_timeout_s, "body_timeout_s": body_timeout_s}
    )


class GuardedHttp(HttpToolsProtocol):
    head_timeout_s = 10.0
    body_timeout_s = 120.0
    _head_bytes = 0
    _in_head = True
    _deadline: asyncio.TimerHandle | None = None
    _idle: asyncio.TimerHandle | None = None
    _discarding = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._discarding or self.transport.is_closing():
            return
        self._arm_idle()
        if self._in_head:
            self._head_bytes += len(data)  # every byte while the head lasts is the head's
        super().data_received(data)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            in_url = not self.headers
            self._refuse(http.HTTPStatus.REQUEST_URI_TOO_LONG if in_url else http.HTTPStatus(431))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._set_deadline(self.head_timeout_s)

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) <= MAX_HEAD_BYTES:  # beyond it the request is refused, unread
            super().on_url(url)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._set_deadline(self.body_timeout_s)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self.cycle is not None and self.cycle.more_body and not self.transport.is_closing():
            self._close_lingering()  # answered before its body ended: the rest is not read
            return
        super().on_response_complete()
        self._arm_idle()

    def _set_deadline(self, seconds: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(seconds, self._timed_out)

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = self.loop.call_later(self.head_timeout_s, self._went_idle)

    def _disarm(self) -> None:
        for timer in (self._deadline, self._idle):
            if timer is not None:
                timer.cancel()
        self._deadline = self._idle = None

    def _went_idle(self) -> None:
        between_requests = self.cycle is not None and self.cycle.response_complete
        if self._in_head and self._head_bytes == 0 and between_requests:
            return  # uvicorn's keep-alive timeout closes an idle kept-alive connection
        if self.flow.read_paused:  # the app has not taken what came: the wait is not the sender's
            self._arm_idle()
            return
        self._timed_out()

    def _timed_out(self) -> None:
        if self.cycle is not None and not self._in_head and self.cycle.response_started:
            return  # the app is answering: its response ends the request
        self._refuse(http.HTTPStatus.REQUEST_TIMEOUT)

    def _refuse(self, status: http.HTTPStatus) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        reason = status.phrase.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
            % (status.value, reason, len(reason), reason)
        )
        self._close_lingering()

    def _close_lingering(self) -> None:
        """Ends the sending side after the answer and drops what still arrives for a moment: closing
        with unread bytes would reset the connection, and the sender might never read its answer."""
        self._disarm()
        self._discarding = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)
