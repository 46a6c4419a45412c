"""Real signing keys and the JWTs they sign (PyJWT + cryptography), for jwtAuth tests."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


class Issuer:
    """An RSA key pair with a key id, publishing its public key as a JWK."""

    def __init__(self, iss: str, kid: str) -> None:
        self.iss = iss
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        return {**out, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.jwk()]}

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.iss, "iat": now, "exp": now + 600, **claims}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": self.kid})
