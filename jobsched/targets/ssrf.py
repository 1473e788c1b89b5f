"""The SSRF guard for webhook targets.

A tenant chooses a webhook's URL, and the worker runs inside the deployer's VPC/account, so a URL
must not reach the instance metadata service, loopback or private networks. The guard resolves the
host name once, rejects every address that is loopback, private, link-local, multicast, reserved,
unspecified or a cloud metadata address, and returns the addresses; the caller then connects to one of
*those* addresses (never resolving again), so DNS rebinding cannot swap in an internal address between
the check and the connection. Host names on the deployment's allow-list
(``JOBSCHED_ALLOWED_HTTP_HOSTS``) skip the address check, for those names only.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

from jobsched.core.errors import PermanentError, RetryableError

METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # EC2/ECS/Lambda instance metadata (IPv4)
        ipaddress.ip_address("fd00:ec2::254"),  # EC2 instance metadata (IPv6)
        ipaddress.ip_address("169.254.170.2"),  # ECS task metadata / credentials endpoint
    }
)

Resolver = Callable[..., list]


class BlockedAddressError(PermanentError):
    """Raised when a webhook's host resolves to an address the SSRF guard refuses. Permanent: retrying
    reaches the same address; the job's URL (or the deployment's allow-list) must change."""

    code = "blocked_address"


def parse_allowed_hosts(value: str | None) -> frozenset[str]:
    """Parse the comma-separated allow-list setting into lower-case host names."""
    return frozenset(h.strip().lower().rstrip(".") for h in (value or "").split(",") if h.strip())


def forbidden_reason(address: str) -> str | None:
    """Why ``address`` may not be contacted, or None if it is a public unicast address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("not globally routable", not ip.is_global),
    )
    for reason, hit in checks:
        if hit:
            return f"a {reason} address"
    return None


def resolve_checked(
    host: str,
    port: int,
    allowed_hosts: Iterable[str] = (),
    resolver: Resolver = socket.getaddrinfo,
) -> list[str]:
    """Resolve ``host`` and return its addresses if every one is allowed.

    Raises :class:`BlockedAddressError` if any resolved address is forbidden (a name that resolves to
    one public and one private address is refused as a whole), :class:`RetryableError` if the name
    does not resolve now (DNS failures are usually transient).
    """
    name = host.lower().rstrip(".")
    try:
        infos = resolver(name, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise RetryableError(f"cannot resolve webhook host {host!r}: {exc}") from exc
    addresses: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise RetryableError(f"webhook host {host!r} resolved to no address")
    if name in {h.lower().rstrip(".") for h in allowed_hosts}:
        return addresses
    for address in addresses:
        reason = forbidden_reason(address)
        if reason:
            raise BlockedAddressError(
                f"webhook host {host!r} resolves to {address}, {reason}; such targets are refused "
                f"unless the deployment allows the host by name"
            )
    return addresses
