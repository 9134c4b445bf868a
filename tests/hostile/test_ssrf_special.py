"""SSRF through special-purpose addresses: every IANA block is refused, and IPv4 inside IPv6 is judged as IPv4.

The table walks the IANA IPv4 and IPv6 Special-Purpose Address Registries (one address per entry,
sub-blocks included), the ways IPv6 carries an IPv4 address (mapped, compatible, translated, NAT64,
6to4, Teredo), and the addresses Python 3.11's ``is_global`` wrongly calls global. Each is given as
a URL literal, the way an attacker would subscribe one, and through a resolver, the way DNS would
hand it over.
"""

from __future__ import annotations

import ipaddress

import pytest

from tracker.adapters.delivery.guard import TargetGuard, TargetRefused, embedded_ipv4, why_refused

ALLOW = " (allow it with [delivery] allow_hosts or TRACKER_DELIVERY_ALLOW_HOSTS)"
LOOPBACK = "a loopback address"
PRIVATE = "a private address"
IETF4 = "an IETF protocol assignment (RFC 6890)"
IETF6 = "an IETF protocol assignment (RFC 2928)"
DOCS4 = "a documentation address (RFC 5737)"

REFUSED = [
    # IANA IPv4 Special-Purpose Address Registry
    ("0.0.0.0", "an unspecified address"),
    ("0.1.2.3", "a 'this network' address (RFC 791)"),
    ("10.20.30.40", PRIVATE),
    ("100.64.0.1", "a shared (carrier-grade NAT) address (RFC 6598)"),
    ("100.127.255.254", "a shared (carrier-grade NAT) address (RFC 6598)"),
    ("127.0.0.1", LOOPBACK),
    ("127.255.255.254", LOOPBACK),
    ("169.254.0.1", "a link-local address"),
    ("172.31.255.1", PRIVATE),
    ("192.0.0.1", IETF4),  # DS-Lite 192.0.0.0/29
    ("192.0.0.8", IETF4),  # IPv4 dummy address
    ("192.0.0.9", IETF4),  # PCP anycast (IANA: globally reachable; no webhook lives there)
    ("192.0.0.10", IETF4),  # TURN anycast
    ("192.0.0.170", IETF4),  # NAT64/DNS64 discovery
    ("192.0.0.171", IETF4),
    ("192.0.0.255", IETF4),
    ("192.0.2.1", DOCS4),
    ("192.31.196.1", "an AS112 address (RFC 7535)"),
    ("192.52.193.1", "an AMT address (RFC 7450)"),
    ("192.88.99.1", "a 6to4 relay anycast address (RFC 7526)"),
    ("192.168.1.1", PRIVATE),
    ("192.175.48.1", "an AS112 address (RFC 7534)"),
    ("198.18.0.1", "a benchmarking address (RFC 2544)"),
    ("198.19.255.255", "a benchmarking address (RFC 2544)"),
    ("198.51.100.7", DOCS4),
    ("203.0.113.9", DOCS4),
    ("224.0.0.251", "a multicast address"),
    ("239.255.255.250", "a multicast address"),
    ("240.0.0.1", "a reserved address (RFC 1112)"),
    ("255.255.255.255", "a broadcast address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("100.100.100.200", "a cloud metadata address"),
    # IANA IPv6 Special-Purpose Address Registry
    ("::", "an unspecified address"),
    ("::1", LOOPBACK),
    ("64:ff9b:1:ffff::102:304", "a local-use NAT64 address (RFC 8215)"),
    ("100::1", "a discard-only address (RFC 6666)"),
    ("100:0:0:1::1", "a dummy address (RFC 9780)"),
    ("2001:1::1", "a PCP anycast address (RFC 7723)"),
    ("2001:1::2", "a TURN anycast address (RFC 8155)"),
    ("2001:1::3", "a DNS-SD SRP anycast address (RFC 9665)"),
    ("2001:1::4", IETF6),
    ("2001:2::1", "a benchmarking address (RFC 5180)"),
    ("2001:3::1", "an AMT address (RFC 7450)"),
    ("2001:4:112::1", "an AS112 address (RFC 7535)"),
    ("2001:10::1", "an ORCHID address (RFC 4843)"),
    ("2001:20::1", "an ORCHIDv2 address (RFC 7343)"),
    ("2001:30::1", "a drone remote ID address (RFC 9374)"),
    ("2001:1ff::1", IETF6),
    ("2001:db8::1", "a documentation address (RFC 3849)"),
    ("2620:4f:8000::1", "an AS112 address (RFC 7534)"),
    ("3fff::1", "a documentation address (RFC 9637)"),
    ("5f00::1", "a segment routing address (RFC 9602)"),
    ("fc00::1", PRIVATE),
    ("fd12:3456::1", PRIVATE),
    ("fe80::1", "a link-local address"),
    ("fec0::1", "a site-local address (deprecated, RFC 3879)"),
    ("ff02::1", "a multicast address"),
    ("ff0e::1", "a multicast address"),
    ("fd00:ec2::254", "a cloud metadata address"),
    # Outside the space IANA allocates for global unicast
    ("4000::1", "not a global unicast address (outside 2000::/3)"),
    # IPv4 carried in IPv6: judged by the IPv4 rules first
    ("::127.0.0.1", f"{LOOPBACK} (it carries IPv4 127.0.0.1)"),  # compatible
    ("::ffff:127.0.0.1", f"{LOOPBACK} (it carries IPv4 127.0.0.1)"),  # mapped
    ("::ffff:0:7f00:1", f"{LOOPBACK} (it carries IPv4 127.0.0.1)"),  # translated (SIIT)
    ("64:ff9b::7f00:1", f"{LOOPBACK} (it carries IPv4 127.0.0.1)"),  # NAT64
    ("64:ff9b::a9fe:a9fe", "a cloud metadata address (it carries IPv4 169.254.169.254)"),
    ("64:ff9b:1::7f00:1", f"{LOOPBACK} (it carries IPv4 127.0.0.1)"),  # local-use NAT64
    ("2002:7f00:1::", f"{LOOPBACK} (it carries IPv4 127.0.0.1)"),  # 6to4
    ("2002:c0a8:101::1", f"{PRIVATE} (it carries IPv4 192.168.1.1)"),
    ("::ffff:192.0.0.8", f"{IETF4} (it carries IPv4 192.0.0.8)"),
    ("::ffff:10.0.0.1", f"{PRIVATE} (it carries IPv4 10.0.0.1)"),
    # Teredo: server 65.54.227.120, client 127.0.0.1 (stored inverted: 0x80ff:fffe)
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", f"{LOOPBACK} (it carries IPv4 127.0.0.1)"),
    # Teredo: server 10.0.0.1, client 8.8.8.8 (inverted: f7f7:f7f7)
    ("2001:0:a00:1:8000:63bf:f7f7:f7f7", f"{PRIVATE} (it carries IPv4 10.0.0.1)"),
    # Carrying a global IPv4 address does not make a tunnel or a deprecated form usable
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "a Teredo address (RFC 4380)"),
    ("2002:808:808::1", "a 6to4 address (RFC 3056)"),
    ("::8.8.8.8", "an IPv4-compatible address (deprecated, RFC 4291)"),
    ("::ffff:0:808:808", "an IPv4-translated address (RFC 2765)"),
    ("64:ff9b:1::808:808", "a local-use NAT64 address (RFC 8215)"),
]

ALLOWED = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "192.0.1.1", "192.0.3.1", "100.128.0.1", "172.32.0.1",
           "2606:4700:4700::1111", "2a00:1450:4001:81b::200e", "2001:200::1",
           "::ffff:8.8.8.8",  # an IPv4 socket address for 8.8.8.8
           "64:ff9b::808:808"]  # NAT64: how an IPv6-only network with DNS64 reaches 8.8.8.8


@pytest.mark.parametrize("address, reason", REFUSED)
def test_a_special_purpose_address_is_refused_as_a_literal_and_when_resolved(address, reason):
    literal = f"[{address}]" if ":" in address else address
    with pytest.raises(TargetRefused) as caught:
        TargetGuard().check(f"https://{literal}/hook")
    assert str(caught.value) == f"refused: {address} is {reason}{ALLOW}"

    guard = TargetGuard(resolver=lambda _host, _port: ["93.184.215.14", address])
    with pytest.raises(TargetRefused) as caught:
        guard.check("https://hooks.example.test/hook")
    assert str(caught.value) == f"refused: hooks.example.test resolves to {address}, {reason}{ALLOW}"


@pytest.mark.parametrize("address", ALLOWED)
def test_a_globally_routable_unicast_address_passes(address):
    assert why_refused(ipaddress.ip_address(address)) is None
    guard = TargetGuard(resolver=lambda _host, _port: [address])
    assert guard.check("https://hooks.example.test/hook").addresses == (address,)


def test_python_is_global_is_not_what_decides():
    # Python 3.11 calls these global; the guard refuses them all.
    fooled = ["::127.0.0.1", "::ffff:0:7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::", "192.0.0.8"]
    assert [why_refused(ipaddress.ip_address(a)) is not None for a in fooled] == [True] * 5


@pytest.mark.parametrize("address, carried", [
    ("::ffff:1.2.3.4", ["1.2.3.4"]),
    ("::1.2.3.4", ["1.2.3.4"]),
    ("::ffff:0:102:304", ["1.2.3.4"]),
    ("64:ff9b::102:304", ["1.2.3.4"]),
    ("64:ff9b:1::102:304", ["1.2.3.4"]),
    ("2002:102:304::", ["1.2.3.4"]),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", ["192.0.2.45", "65.54.227.120"]),  # RFC 4380's example
    ("::", []), ("::1", []), ("2606:4700::1", []),
])
def test_the_ipv4_address_inside_an_ipv6_one(address, carried):
    assert [str(a) for a in embedded_ipv4(ipaddress.IPv6Address(address))] == carried


def test_the_allow_list_still_lets_an_operator_name_a_special_address():
    guard = TargetGuard(["192.0.0.0/24", "64:ff9b::/96"])
    assert guard.check("http://192.0.0.8/hook").addresses == ("192.0.0.8",)
    assert guard.check("http://[64:ff9b::7f00:1]/hook").addresses == ("64:ff9b::7f00:1",)
