"""No SSRF: where an alert may be sent, checked when subscribing and again at every send.

A target's host is resolved once, **every** address it resolves to is checked, and the request
then goes to the checked address (the URL's host kept in ``Host`` and in TLS SNI and certificate
checks), so a DNS answer that changes between the check and the connection cannot redirect an
alert. Refused: loopback, private (RFC 1918, fc00::/7), link-local (169.254/16, fe80::/10),
unspecified, multicast, shared and reserved ranges, and cloud metadata addresses, unless the host
(or a network holding the address) is on the allow list (``[delivery] allow_hosts``,
``TRACKER_DELIVERY_ALLOW_HOSTS``). Plain ``http`` is only for allowed hosts. Redirects are never
followed (the client is built with ``follow_redirects=False``), and proxies from the environment
are ignored (a proxy would resolve the name itself).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import httpx

from tracker.errors import TrackerError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

# Instance metadata services: AWS/GCP/Azure/OpenStack, AWS over IPv6, Alibaba, ECS task metadata.
METADATA = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2"))


class TargetRefused(TrackerError):
    """A delivery target that must not be contacted (or cannot be checked)."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, in the resolver's order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def why_refused(address: IPAddress) -> str | None:
    """None for an address alerts may go to, else what kind of address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA:
        return "a cloud metadata address"
    checks = (("is_loopback", "a loopback"), ("is_unspecified", "an unspecified"), ("is_link_local", "a link-local"),
              ("is_multicast", "a multicast"), ("is_private", "a private"))
    for attribute, label in checks:
        if getattr(address, attribute):
            return f"{label} address"
    if not address.is_global:
        return "a reserved (not globally routable) address"
    return None


@dataclass(frozen=True)
class CheckedTarget:
    """A URL whose host resolved to ``addresses``, all of them checked."""

    url: httpx.URL
    addresses: tuple[str, ...]

    @property
    def host(self) -> str:
        return self.url.host

    @property
    def display(self) -> str:
        """What may be logged: scheme, host and port, never the path (a Slack URL is a credential)."""
        return f"{self.url.scheme}://{self.url.netloc.decode()}"


class TargetGuard:
    """Checks delivery URLs against the allow list; ``resolver`` is the DNS (a test may pass its own)."""

    def __init__(self, allow_hosts: Iterable[str] = (), *, resolver: Resolver | None = None) -> None:
        self.names: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allow_hosts:
            entry = entry.strip().lower().strip("[]")
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.names.add(entry.rstrip("."))
        self.resolve = resolver or system_resolver

    def _address_allowed(self, address: IPAddress) -> bool:
        return any(address in net for net in self.networks if net.version == address.version)

    def check(self, url: str) -> CheckedTarget:
        """Resolve and check ``url``; TargetRefused says why it may not be used."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise TargetRefused(f"invalid URL: {exc}") from None
        host = parsed.host.lower().rstrip(".")
        if parsed.scheme not in ("http", "https") or not host:
            raise TargetRefused("the URL must be http(s)://host/...")
        named = host in self.names
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            found = self.resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise TargetRefused(f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}") from None
        if not found:
            raise TargetRefused(f"cannot resolve {host}: no addresses")
        allowed = named
        for text in found:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            reason = why_refused(address)
            if named or self._address_allowed(address):
                allowed = True
            elif reason:
                via = " is" if text == host else f" resolves to {text},"
                raise TargetRefused(f"refused: {host}{via} {reason} (allow it with [delivery] allow_hosts "
                                    "or TRACKER_DELIVERY_ALLOW_HOSTS)")
        if parsed.scheme == "http" and not allowed:
            raise TargetRefused(f"refused: {host} must be reached over https (plain http only for allow_hosts)")
        return CheckedTarget(url=parsed, addresses=tuple(found))


def make_client(timeout: float) -> httpx.Client:
    """The HTTP client deliveries use: no redirects followed, no proxies or .netrc from the environment."""
    return httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=False, trust_env=False,
                        headers={"User-Agent": "upstream-tracker"})


def post_pinned(client: httpx.Client, target: CheckedTarget, *, content: bytes,
                headers: Mapping[str, str]) -> httpx.Response:
    """POST to the checked address itself; the URL's host stays in ``Host`` and in TLS (SNI, certificate)."""
    last: httpx.TransportError | None = None
    for address in target.addresses:
        request = client.build_request(
            "POST", target.url.copy_with(host=address), content=content,
            headers={**headers, "Host": target.url.netloc.decode()},
            extensions={"sni_hostname": target.host},
        )
        try:
            return client.send(request)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            last = exc  # the next checked address, if the name has several
    assert last is not None
    raise last
