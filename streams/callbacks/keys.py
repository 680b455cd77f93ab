"""Each caller's own callback signing keys, in the Standard Webhooks format (`whsec_` + base64).

A caller's key is derived from the deployment's `SCRAPESTREAM_CALLBACK_SECRET`, its name and a
generation number, so no caller's key verifies another caller's callbacks, and the workers share
one setting. Rotating is naming a caller's generations (`SCRAPESTREAM_CALLBACK_KEY_GENERATIONS`):
while two are named, each callback carries both signatures, and the receiver moves to the newer key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

from pydantic import SecretStr

LABEL = b"scrapestream-callback-key/1\n"
FIRST_GENERATION = (1,)


class CallbackKeys:
    def __init__(self, secret: str, generations: Mapping[str, tuple[int, ...]]) -> None:
        self._master = base64.b64decode(secret.removeprefix("whsec_"))
        self._generations = generations

    def key(self, caller: str, generation: int) -> str:
        """The `whsec_` key of `caller`'s `generation`."""
        material = LABEL + caller.encode() + b"\n" + str(generation).encode()
        return "whsec_" + base64.b64encode(hmac.new(self._master, material, hashlib.sha256).digest()).decode()

    def signing(self, caller: str) -> list[str]:
        """The keys `caller`'s callbacks are signed with now, one signature each."""
        return [self.key(caller, generation) for generation in self.generations(caller)]

    def generations(self, caller: str) -> tuple[int, ...]:
        return self._generations.get(caller, FIRST_GENERATION)


def callback_keys(
    secret: SecretStr | None, generations: Mapping[str, tuple[int, ...]]
) -> CallbackKeys | None:
    """Each caller's signing keys from the deployment's secret; None: callbacks go unsigned."""
    return None if secret is None else CallbackKeys(secret.get_secret_value(), generations)
