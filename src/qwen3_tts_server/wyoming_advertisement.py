"""The Wyoming port's mDNS advertisement (WYOMING_ZEROCONF), Home Assistant's `_wyoming._tcp` service, through the
wyoming library's own advertiser. Shared by the Wyoming server and the gateway (which owns the port in gateway
mode), so it imports nothing heavier than zeroconf, and that only when asked for."""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import TYPE_CHECKING

from .gateway.listen import WILDCARD_HOSTS

if TYPE_CHECKING:
    from wyoming.zeroconf import HomeAssistantZeroconf

log = logging.getLogger("qwen3_tts_server.wyoming")


class WyomingAdvertisement:
    def __init__(self) -> None:
        self.name: str | None = None  # the mDNS service name, once advertised
        self._advertiser: HomeAssistantZeroconf | None = None

    async def advertise(self, host: str, port: int) -> None:
        """Advertise `port` on the address it listens on (a wildcard: the address of the interface that reaches
        the LAN). A port on the loopback is not advertised; a failure is a warning, never a refusal to serve."""
        address = None if host in WILDCARD_HOSTS else host
        if address is not None and _is_loopback(address):
            log.warning("WYOMING_ZEROCONF is set but the Wyoming port listens on %s only: not advertised", address)
            return
        from wyoming.zeroconf import HomeAssistantZeroconf
        from zeroconf import Error as ZeroconfError

        name = f"qwen3-tts-{socket.gethostname().split('.')[0]}"
        try:
            advertiser = HomeAssistantZeroconf(port, name=name, host=address)
        except OSError as exc:
            log.warning("WYOMING_ZEROCONF: cannot advertise the Wyoming port: %s", exc)
            return
        try:
            await advertiser.register_server()
        except (OSError, ZeroconfError) as exc:
            log.warning("WYOMING_ZEROCONF: cannot advertise the Wyoming port: %s", exc)
            await _withdraw(advertiser)
            return
        self._advertiser, self.name = advertiser, name
        log.info("wyoming advertised over mDNS as %s on %s:%d", name, advertiser.host, port)

    async def withdraw(self) -> None:
        if self._advertiser is not None:
            await _withdraw(self._advertiser)
            self._advertiser = None


async def _withdraw(advertiser: HomeAssistantZeroconf) -> None:
    # The library's class registers only; closing its AsyncZeroconf withdraws the service and ends its threads.
    await advertiser._aiozc.async_close()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name
        return host == "localhost"
