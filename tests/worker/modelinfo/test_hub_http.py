"""The hub client's TLS context: the CA bundle is loaded once per process and CA
setting (SSL_CERT_FILE, as httpx reads it), not once per client."""

from __future__ import annotations

import shutil
import ssl
import time

import certifi

from worker.modelinfo import hub_http
from worker.modelinfo.hub_http import HubClient


def test_the_ca_bundle_is_loaded_once_per_ca_setting(monkeypatch, tmp_path):
    loaded: list[object] = []
    plain = ssl.SSLContext.load_verify_locations

    def counted(self, cafile=None, capath=None, cadata=None):
        loaded.append(cafile)
        return plain(self, cafile, capath, cadata)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    hub_http._tls.cache_clear()
    deadline = time.monotonic() + 5
    clients = [HubClient("https://hub.invalid", {}, deadline) for _ in range(3)]
    assert loaded == [certifi.where()]
    own = tmp_path / "ca.pem"
    shutil.copy(certifi.where(), own)
    monkeypatch.setenv("SSL_CERT_FILE", str(own))
    clients.append(HubClient("https://hub.invalid", {}, deadline))
    assert loaded == [certifi.where(), str(own)]
    for client in clients:
        client.close()
    hub_http._tls.cache_clear()
