"""What HTTP Basic (httpauth/) costs, side by side in one run, against a broker with SASL
(`tests/securebroker.py`: SCRAM-SHA-512 users from --add-scram):

  - a login to the cluster (a cache miss: an AdminClient's SCRAM exchange and a metadata
    answer) against a cached verification (one HMAC), each a median of its own;
  - a registry request (`GET /schemas/types`, in process over ASGI) with auth off and on
    (the login cached), alternating rounds: the ratio is what auth adds to a request;
  - a Karapace authfile check with sha512 (PBKDF2, 5000 rounds) and scrypt, which a cached
    verification also replaces.

    .venv/bin/python bench/httpauth_bench.py [--requests 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")


def median_s(fn: object, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import django
    django.setup()
    import httpx
    from asgiref.sync import async_to_sync
    from django.test import override_settings

    import httpauth
    from clusterclient.login import kafka_login
    from httpauth.authfile import User, hash_password
    from millrace.asgi import application
    from tests.securebroker import SCRAM_USERS, start_secured_broker

    user, password = SCRAM_USERS["SCRAM-SHA-512"]
    header = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_secured_broker(Path(tmp))
        try:
            with override_settings(
                    MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS=broker.bootstrap("SASL_PLAINTEXT"),
                    MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL="SASL_PLAINTEXT",
                    MILLRACE_HTTP_AUTH_SASL_MECHANISM="SCRAM-SHA-512"):
                config = httpauth.kafka_config()
                login = median_s(lambda: kafka_login(config, user, password, 10.0), 15)
                httpauth.authenticate(httpauth.REGISTRY, header)
                hit = median_s(lambda: httpauth.authenticate(httpauth.REGISTRY, header), 20000)
                print(f"login to the cluster: {login * 1e3:.1f} ms; cached verification: "
                      f"{hit * 1e6:.1f} us; ratio {login / hit:.0f}x")

                async def requests(n: int, auth: bool) -> float:
                    transport = httpx.ASGITransport(app=application)
                    headers = {"Authorization": header} if auth else {}
                    async with httpx.AsyncClient(transport=transport,
                                                 base_url="http://127.0.0.1") as client:
                        start = time.perf_counter()
                        for _ in range(n):
                            answer = await client.get("/schema-registry/schemas/types",
                                                      headers=headers)
                            assert answer.status_code == 200, answer.content
                        return (time.perf_counter() - start) / n

                logging.getLogger("httpx").setLevel(logging.WARNING)
                for auth in (False, True):  # warm up both paths first
                    with override_settings(MILLRACE_HTTP_AUTH=auth):
                        async_to_sync(requests)(args.requests, auth)
                off, on = [], []
                for _ in range(args.rounds):
                    with override_settings(MILLRACE_HTTP_AUTH=False):
                        off.append(async_to_sync(requests)(args.requests, False))
                    with override_settings(MILLRACE_HTTP_AUTH=True):
                        on.append(async_to_sync(requests)(args.requests, True))
                off_s, on_s = statistics.median(off), statistics.median(on)
                print(f"GET /schemas/types in process: auth off {off_s * 1e6:.0f} us, "
                      f"on (cached) {on_s * 1e6:.0f} us; ratio on/off {on_s / off_s:.3f}")
        finally:
            broker.process.stop()
    for algorithm in ("sha512", "scrypt"):
        entry = User("u", algorithm, "salt", hash_password(algorithm, "salt", "pw"))
        cost = median_s(lambda e=entry: e.check("pw"), 20)
        print(f"authfile {algorithm} check: {cost * 1e3:.2f} ms; ratio to a cached "
              f"verification {cost / hit:.0f}x")


if __name__ == "__main__":
    main()
