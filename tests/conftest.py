"""Shared fixtures. No test reaches the network: connections leave only for loopback."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest

from mas.team.scenario import load_scenario

pytest_plugins = ["tests.fault_server"]  # the fault_server fixture

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
def cache(tmp_path_factory) -> Path:
    """The user's cache of the session (the screen's verdicts on lessons), never the real one."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def home(tmp_path_factory, monkeypatch, cache) -> Path:
    """Every test (and every ``mas`` it starts) writes its runs and libraries into a fresh
    folder of its own, never into the checkout, and its cache into the session's."""
    folder = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("MAS_HOME", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return folder


@pytest.fixture(scope="session")
def maths():
    return load_scenario("maths")


@pytest.fixture
def library_path(tmp_path) -> Path:
    return tmp_path / "libraries" / "maths.json"
