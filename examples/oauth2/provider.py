"""A tiny OpenID provider for the oauth2 example: the authorization-code flow with PKCE.

Serves discovery (/.well-known/openid-configuration), /authorize (signs in
the user at once and redirects back with a code), /token (checks the client
secret, the code, its redirect URI and the PKCE verifier) and /logout. Run it
next to `lychgate run examples/oauth2`:

    .venv/bin/python examples/oauth2/provider.py            # listens on 127.0.0.1:9003

A stand-in for a real identity provider (Keycloak, Dex, Auth0, ...), never
one: it signs in whoever asks.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import secrets
from urllib.parse import urlencode

from aiohttp import web

CLIENT_ID, CLIENT_SECRET, USER = "shop", "example-client-secret", "ada"


def app(base: str) -> web.Application:
    codes: dict[str, dict[str, str]] = {}

    async def discovery(request: web.Request) -> web.Response:
        return web.json_response({
            "issuer": base, "authorization_endpoint": f"{base}/authorize", "token_endpoint": f"{base}/token",
            "end_session_endpoint": f"{base}/logout", "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        })

    async def authorize(request: web.Request) -> web.Response:
        q = dict(request.query)
        if q.get("client_id") != CLIENT_ID or q.get("response_type") != "code" or "redirect_uri" not in q:
            return web.Response(status=400, text="not a valid authorization request\n")
        code = secrets.token_urlsafe(16)
        codes[code] = q
        raise web.HTTPFound(q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", "")}))

    async def token(request: web.Request) -> web.Response:
        form = dict(await request.post())
        if (form.get("client_id"), form.get("client_secret")) != (CLIENT_ID, CLIENT_SECRET):
            return web.json_response({"error": "invalid_client"}, status=401)
        asked = codes.pop(str(form.get("code")), None)
        if asked is None or form.get("redirect_uri") != asked["redirect_uri"]:
            return web.json_response({"error": "invalid_grant"}, status=400)
        verifier = str(form.get("code_verifier", "")).encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
        if challenge != asked.get("code_challenge", challenge):
            return web.json_response({"error": "invalid_grant"}, status=400)
        return web.json_response({"access_token": f"access-for-{USER}-" + secrets.token_urlsafe(8),
                                  "id_token": f"id-for-{USER}", "token_type": "Bearer", "expires_in": 3600})

    async def logout(request: web.Request) -> web.Response:
        return web.Response(text=f"{USER} is signed out of the provider\n")

    out = web.Application()
    out.router.add_get("/.well-known/openid-configuration", discovery)
    out.router.add_get("/authorize", authorize)
    out.router.add_post("/token", token)
    out.router.add_get("/logout", logout)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9003)
    args = parser.parse_args()
    # Envoy's OAuth2 state in the redirect can be several kB long.
    web.run_app(app(f"http://127.0.0.1:{args.port}"), host="127.0.0.1", port=args.port, print=None,
                handler_args={"max_line_size": 65536, "max_field_size": 65536})


if __name__ == "__main__":
    main()
