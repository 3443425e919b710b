"""Shared fixtures. No test reaches the network: connections leave only for loopback."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest

from mas.scenario import load_scenario

_connect = socket.socket.connect


def _loopback_only(self, address):
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            allowed = ipaddress.ip_address(host).is_loopback
        except ValueError:
            allowed = host == "localhost"
        if not allowed:
            raise RuntimeError(f"tests must not reach the network (tried {host})")
    return _connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


@pytest.fixture(scope="session")
def maths():
    return load_scenario("maths")


@pytest.fixture
def library_path(tmp_path) -> Path:
    return tmp_path / "libraries" / "maths.json"
