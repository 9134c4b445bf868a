"""No SSRF: where an alert may be sent, checked when subscribing and again at every send.

A target's host is resolved once, **every** address it resolves to is checked, and the request
then goes to the checked address (the URL's host kept in ``Host`` and in TLS SNI and certificate
checks), so a DNS answer that changes between the check and the connection cannot redirect an
alert. Only globally routable unicast addresses pass (:func:`why_refused`): every block of IANA's
IPv4 and IPv6 special-purpose registries is refused, loopback, private, link-local, multicast and
cloud metadata addresses among them, and an IPv6 address that carries an IPv4 one (mapped,
compatible, translated, NAT64, 6to4, Teredo) is judged by the IPv4 address too, unless the host
(or a network holding the address) is on the allow list (``[delivery] allow_hosts``,
``TRACKER_DELIVERY_ALLOW_HOSTS``). Plain ``http`` is only for allowed hosts. Redirects are never
followed (the client is built with ``follow_redirects=False``), and proxies from the environment
are ignored (a proxy would resolve the name itself).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import httpx2

from tracker.adapters.hub import deadline
from tracker.core.errors import TrackerError

log = logging.getLogger("tracker.delivery.guard")  # the name operators filter logs by, not the module path

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

# Instance metadata services: AWS/GCP/Azure/OpenStack, AWS over IPv6, Alibaba, ECS task metadata.
METADATA = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2"))

# Our own tables rather than ``ipaddress``'s ``is_global``/``is_private``: what those say changed
# between Python releases (3.11 calls 192.0.0.8 and ::127.0.0.1 global), and a webhook has no
# business with any block IANA sets aside, even those it marks globally reachable (AS112, AMT,
# anycast). From the IANA IPv4 and IPv6 Special-Purpose Address Registries (2025), plus multicast;
# the longest matching prefix names the address.
_IPV4_BLOCKS = {
    "0.0.0.0/8": "a 'this network' address (RFC 791)",
    "0.0.0.0/32": "an unspecified address",
    "10.0.0.0/8": "a private address",
    "100.64.0.0/10": "a shared (carrier-grade NAT) address (RFC 6598)",
    "127.0.0.0/8": "a loopback address",
    "169.254.0.0/16": "a link-local address",
    "172.16.0.0/12": "a private address",
    "192.0.0.0/24": "an IETF protocol assignment (RFC 6890)",
    "192.0.2.0/24": "a documentation address (RFC 5737)",
    "192.31.196.0/24": "an AS112 address (RFC 7535)",
    "192.52.193.0/24": "an AMT address (RFC 7450)",
    "192.88.99.0/24": "a 6to4 relay anycast address (RFC 7526)",
    "192.168.0.0/16": "a private address",
    "192.175.48.0/24": "an AS112 address (RFC 7534)",
    "198.18.0.0/15": "a benchmarking address (RFC 2544)",
    "198.51.100.0/24": "a documentation address (RFC 5737)",
    "203.0.113.0/24": "a documentation address (RFC 5737)",
    "224.0.0.0/4": "a multicast address",
    "240.0.0.0/4": "a reserved address (RFC 1112)",
    "255.255.255.255/32": "a broadcast address",
}
_IPV6_BLOCKS = {
    "::/128": "an unspecified address",
    "::1/128": "a loopback address",
    "::/96": "an IPv4-compatible address (deprecated, RFC 4291)",
    "::ffff:0:0/96": "an IPv4-mapped address",
    "::ffff:0:0:0/96": "an IPv4-translated address (RFC 2765)",
    "64:ff9b::/96": "a NAT64 address (RFC 6052)",
    "64:ff9b:1::/48": "a local-use NAT64 address (RFC 8215)",
    "100::/64": "a discard-only address (RFC 6666)",
    "100:0:0:1::/64": "a dummy address (RFC 9780)",
    "2001::/23": "an IETF protocol assignment (RFC 2928)",
    "2001::/32": "a Teredo address (RFC 4380)",
    "2001:1::1/128": "a PCP anycast address (RFC 7723)",
    "2001:1::2/128": "a TURN anycast address (RFC 8155)",
    "2001:1::3/128": "a DNS-SD SRP anycast address (RFC 9665)",
    "2001:2::/48": "a benchmarking address (RFC 5180)",
    "2001:3::/32": "an AMT address (RFC 7450)",
    "2001:4:112::/48": "an AS112 address (RFC 7535)",
    "2001:10::/28": "an ORCHID address (RFC 4843)",
    "2001:20::/28": "an ORCHIDv2 address (RFC 7343)",
    "2001:30::/28": "a drone remote ID address (RFC 9374)",
    "2001:db8::/32": "a documentation address (RFC 3849)",
    "2002::/16": "a 6to4 address (RFC 3056)",
    "2620:4f:8000::/48": "an AS112 address (RFC 7534)",
    "3fff::/20": "a documentation address (RFC 9637)",
    "5f00::/16": "a segment routing address (RFC 9602)",
    "fc00::/7": "a private address",
    "fe80::/10": "a link-local address",
    "fec0::/10": "a site-local address (deprecated, RFC 3879)",
    "ff00::/8": "a multicast address",
}
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")  # all the IPv6 space IANA allocates for unicast
# Where an IPv6 address carrying an IPv4 one may still be used, when that IPv4 address may: a
# mapped address is an IPv4 socket address, and DNS64 answers every IPv4-only name with NAT64.
_CARRIERS_PASSING = ("::ffff:0:0/96", "64:ff9b::/96")
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


class TargetRefused(TrackerError):
    """A delivery target that must not be contacted (or cannot be checked)."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, in the resolver's order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _blocks(table: Mapping[str, str]) -> list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]]:
    nets = [(ipaddress.ip_network(prefix), label) for prefix, label in table.items()]
    return sorted(nets, key=lambda item: -item[0].prefixlen)  # longest prefix first


IPV4_BLOCKS = _blocks(_IPV4_BLOCKS)
IPV6_BLOCKS = _blocks(_IPV6_BLOCKS)


def _block_of(address: IPAddress) -> tuple[str, str] | None:
    """(prefix, label) of the special-purpose block holding ``address``, or None."""
    for net, label in IPV4_BLOCKS if address.version == 4 else IPV6_BLOCKS:
        if address in net:
            return str(net), label
    return None


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: mapped, compatible, translated, NAT64, 6to4, Teredo."""
    value = int(address)
    low = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.teredo is not None:
        server, client = address.teredo
        return [client, server]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if value >> 32 in (0, 0xFFFF0000) and value > 1:  # ::a.b.c.d, ::ffff:0:a.b.c.d (not :: or ::1)
        return [low]
    if any(address in net for net in _NAT64):
        return [low]  # the /96 form; a local-use /48 is refused whatever it carries
    return []


def _ipv4_reason(address: ipaddress.IPv4Address) -> str | None:
    if address in METADATA:
        return "a cloud metadata address"
    block = _block_of(address)
    return block[1] if block else None


def why_refused(address: IPAddress) -> str | None:
    """None for an address alerts may go to (globally routable unicast), else what kind of address it is."""
    if address in METADATA:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_reason(address)
    for carried in embedded_ipv4(address):
        reason = _ipv4_reason(carried)
        if reason:
            return f"{reason} (it carries IPv4 {carried})"
    block = _block_of(address)
    if block is not None:
        prefix, label = block
        return None if prefix in _CARRIERS_PASSING else label
    if address not in _GLOBAL_UNICAST:
        return "not a global unicast address (outside 2000::/3)"
    return None


@dataclass(frozen=True)
class CheckedTarget:
    """A URL whose host resolved to ``addresses``, all of them checked."""

    url: httpx2.URL
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

    def check(self, url: str, *, unresolved_ok: bool = False) -> CheckedTarget:
        """Resolve and check ``url``; TargetRefused says why it may not be used. ``unresolved_ok``: a host name
        that does not resolve now (offline) passes with no addresses; every send resolves and checks it."""
        try:
            parsed = httpx2.URL(url)
        except (httpx2.InvalidURL, TypeError) as exc:
            raise TargetRefused(f"invalid URL: {exc}") from None
        host = parsed.host.lower().rstrip(".")
        if parsed.scheme not in ("http", "https") or not host:
            raise TargetRefused("the URL must be http(s)://host/...")
        named = host in self.names
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            found = self.resolve(host, port)
        except (OSError, UnicodeError) as exc:
            if unresolved_ok and not _is_address(host):
                if parsed.scheme == "http" and not named:
                    raise TargetRefused(f"refused: {host} must be reached over https (plain http only for "
                                        "allow_hosts)") from None
                return CheckedTarget(url=parsed, addresses=())
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


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def make_client(timeout: float) -> httpx2.Client:
    """The HTTP client deliveries use: no redirects followed, no proxies or .netrc from the environment,
    every socket operation bounded by the calling thread's deadline (:mod:`tracker.adapters.hub.deadline`, which
    bounds the Hub's requests the same way)."""
    return httpx2.Client(timeout=httpx2.Timeout(timeout), follow_redirects=False, trust_env=False,
                         headers={"User-Agent": "upstream-tracker", "Accept-Encoding": "identity"},
                         transport=deadline.DeadlineTransport(trust_env=False))


@dataclass(frozen=True)
class Answer:
    """What a receiver answered: its status and headers, and the start of its body as text.

    The body is read only for an error (what a receiver says about a failure is worth a log
    line), and at most ``max_bytes`` of it, raw and decoded alike: a gigabyte body, or a megabyte
    of gzip that inflates to one, costs ``max_bytes``. The rest is never read.
    """

    status: int
    headers: httpx2.Headers
    text: str


def read_capped(response: httpx2.Response, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of the body, decoded (gzip, deflate or none), at most ``max_bytes`` read raw.

    Stops at the cap, at the attempt's deadline, or when the receiver stops answering, and keeps
    what it has. Another content coding (br, zstd) is not decoded: nothing is shown of it.
    """
    coding = response.headers.get("content-encoding", "identity").strip().lower()
    if coding not in ("identity", "gzip", "x-gzip", "deflate", ""):
        return b""
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 32) if coding not in ("identity", "") else None  # gzip or zlib
    out, raw = bytearray(), 0
    at = deadline.current()
    try:
        for chunk in response.iter_raw():
            chunk = chunk[:max_bytes - raw]
            raw += len(chunk)
            out += inflate.decompress(chunk, max_bytes - len(out)) if inflate is not None else chunk
            if raw >= max_bytes or len(out) >= max_bytes or (at is not None and time.monotonic() >= at):
                break
    except (httpx2.TransportError, zlib.error):
        pass  # a timeout, a dropped connection, broken gzip: what was read is what there is
    return bytes(out[:max_bytes])


def post_pinned(client: httpx2.Client, target: CheckedTarget, *, content: bytes, headers: Mapping[str, str],
                max_bytes: int) -> Answer:
    """POST to the checked address itself; the URL's host stays in ``Host`` and in TLS (SNI, certificate).

    Call it inside ``deadline.active(at)``: connecting, sending and reading the answer all end by
    then. A 2xx answer's body is not read at all; an error's is read up to ``max_bytes``.
    """
    last: httpx2.TransportError | None = None
    for address in target.addresses:
        request = client.build_request(
            "POST", target.url.copy_with(host=address), content=content,
            headers={**headers, "Host": target.url.netloc.decode()},
            extensions={"sni_hostname": target.host},
        )
        try:
            response = client.send(request, stream=True)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            last = exc  # the next checked address, if the name has several (and time is left)
            at = deadline.current()
            if at is not None and time.monotonic() >= at:
                break
            continue
        try:
            body = b"" if 200 <= response.status_code < 300 else read_capped(response, max_bytes)
            return Answer(response.status_code, response.headers,
                          body.decode(response.charset_encoding or "utf-8", errors="replace"))
        finally:
            response.close()
    assert last is not None
    raise last
