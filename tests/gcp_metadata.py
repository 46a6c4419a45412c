"""A GCE metadata server for tests: the identity endpoint, as Google documents it.

`GET /computeMetadata/v1/instance/service-accounts/default/identity?audience=AUD`
answers a Google-style ID token (an RS256 JWT signed with a key made here) whose
`aud` is AUD, for the service account `email`. As the real server, it insists on
`Metadata-Flavor: Google` (403 without), refuses requests carrying
`X-Forwarded-For` (403: the header means a proxy forwarded it), wants an
`audience` (400) and answers with `Metadata-Flavor: Google`. `failing` makes it
answer 503, as a metadata server in trouble does. Every request is recorded.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

IDENTITY_PATH = "/computeMetadata/v1/instance/service-accounts/default/identity"
ISSUER = "https://accounts.google.com"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(token: str) -> dict[str, Any]:
    """The payload of a JWT (not verified: for reading what a backend received)."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@dataclass
class Asked:
    path: str
    flavor: str | None
    audience: str | None


@dataclass
class MetadataServer:
    email: str = "gateway@test-project.iam.gserviceaccount.com"
    failing: bool = False
    asked: list[Asked] = field(default_factory=list)
    port: int = 0
    _key: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    _server: ThreadingHTTPServer | None = None

    def token(self, audience: str) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "kid": "lychgate-test", "typ": "JWT"}
        payload = {"aud": audience, "azp": "1234567890", "email": self.email, "email_verified": True,
                   "exp": now + 3600, "iat": now, "iss": ISSUER, "sub": "1234567890"}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def start(self, host: str = "127.0.0.1", port: int = 0) -> MetadataServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                audience = parse_qs(url.query).get("audience", [None])[0]
                flavor = self.headers.get("Metadata-Flavor")
                server.asked.append(Asked(url.path, flavor, audience))
                if server.failing:
                    self._answer(503, "metadata server unavailable\n")
                elif flavor != "Google" or self.headers.get("X-Forwarded-For") is not None:
                    self._answer(403, "Missing Metadata-Flavor:Google header, or X-Forwarded-For present.\n")
                elif url.path != IDENTITY_PATH:
                    self._answer(404, "not found\n")
                elif not audience:
                    self._answer(400, "non-empty audience parameter required\n")
                else:
                    self._answer(200, server.token(audience))

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
