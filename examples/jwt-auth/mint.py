"""Print a JWT for the jwt-auth example, signed with the example's demo key.

    .venv/bin/python examples/jwt-auth/mint.py --sub ada

Only `cryptography` (a lychgate dependency) is needed: RS256 is an RSA
PKCS#1 v1.5 signature over SHA-256 of `base64url(header).base64url(claims)`.
"""

from __future__ import annotations

import argparse
import base64
import json
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

# A demo key: its public half is in extension.yaml. Never use it for anything real.
DEMO_KEY = """-----BEGIN PRIVATE KEY-----
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDGsMeVQ/VARf11
W0Fzl8/JvD2QeeepjOjcFqq42tCduHq6lcdgVj1ODzkROxLfCIxbwai7MuwE9qZx
n3Z5r16d9hfqZmF8cmCbIGwjGroEl2vf27z7LVfKFw+A4A6hC5gojZt215jVGnTM
6jQ3eRu/xCi1tNLrz1H4hbQnh+LRzw9zmyJssb0rKb0VzLngzkPthpPUand95IbM
6WvQTeZcCbig0cR//c/s31q1r4oGbxw0V436vr9KgQi/1Cvn8SfUB8URvaXmNVOi
oVUpkZ/WXImgbU7Y7w5sTetPenSluHVBBWyEFlZUIgQdc96WIR8Npc/oRi+SWRdV
1zk9ZnzRAgMBAAECggEAAs+QKT5Kf0fmMaVyd/dJNRxEvjEdS/6ecjOfY2lUC3En
SlGxXf1mVV79go8EgbN6Ider4ocSQ/E10lRsTYUjuGYZeUNMxIENORCUuwvnHwbB
28s84YxHCki4e00gI9rZQpSbQwuCgdxDk/0Js1GzKOu2XDi0Ran7icGhdnAzjx6B
gJwvW5IGusTMgLxbZd9Uj4OLbcGEsV7isMqK1xq2DDX9sKVd2zy+CEK0nHl/pZkk
GP7nwKRfYkrARKdmuPNcbYPXzYapd+FgqLDkwovB0uUX1zeEWFmwdBS5IhqIWypH
AphyAtF3qS3Gk4StCRlhhUkPC4fQmVjZEZ7MhWP1yQKBgQDtaGsJep7NvKRMo/xk
XUe7BFvu8lSmcPEhWEnlBBDKYvSayS1SbF0abcoVrZJzgwZoXyVpFwFdr7hCYQnI
5CIrA2M5NcFw50Q4KC2PH/VcrUi76WrhSMvfQhAPrVzlHmQssdFbxtst+iz9KQcr
yVGePrFhvYfLx/oaBynWc8RkaQKBgQDWQCbSXD2VF73vUDM3zUGXfBqKkYqG6Gl0
zPPYfVKSAJic2vmGck99M395YE3tlgCVspxZIfiIhuaUWW2tpLIhvv/skqZeeLhI
xypN1mKN4O3FjX4LcCqxl76TTXAquU4XYCvbGUE883+semC9xNxPTVPyTSjeRm8H
HlLHWPIoKQKBgQCaTdfkHVLCHe4b8inFgetxXm/yaocidx4CskO1GmNfZ9ncEQ3o
GI6a8uj6FgquEWdExzKlj1JP9jooyrF1ZPHgSx9eu9Wy8F2islqKQBdV2TsBB8F0
E8COp32Q8vkB4jLx6dFNeX5T79r14IjMqNjnpY/dGzb7+EpSSH2k6TGooQKBgQCW
REY2MiWrBQzc5QYXNCm14oAHAg8Dkcws9HZuN2+LIUnocZii2Fex+0WDzqy5XwSn
+a64wR+8OclM8PAA4stg6cI7nZt8FPVDbhTYpO1YjxKVBSkLQq9fAYvTanOqM292
66e2sp7T7gB06xwg3QqbwCOJhN6ODx5eAsGSOWsWCQKBgBh2O2YnmhfXfk5SNieM
Eh+RESBlmc6jau6hIm8VZIYLR+RYpJkJKa3vQ8jKGyUTCC/m1YcECyu1lbQW4rke
i+5Ypf2IXMUtCSVIzE81zrrOmVV181wdibkplqLoS1ZHbFfVz5NT8k4CUMY5gAuy
g+ouvmV0wijlt4J0W4mY9Cqs
-----END PRIVATE KEY-----
"""


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint(sub: str, audience: str = "api", ttl: int = 3600) -> str:
    key = serialization.load_pem_private_key(DEMO_KEY.encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": "example"}
    claims = {"iss": "https://idp.example.com", "aud": audience, "sub": sub, "iat": now, "exp": now + ttl}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64(signature)}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sub", default="ada")
    parser.add_argument("--aud", default="api")
    args = parser.parse_args()
    print(mint(args.sub, args.aud))
