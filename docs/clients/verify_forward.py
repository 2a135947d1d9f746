"""Verify that a webhook event came from the pod's consent sidecar. Python 3, standard library only.

    python3 verify_forward.py 8080 /var/run/secrets/consent-sidecar/app-signing-secret
"""
import hashlib
import hmac
import http.server
import json
import re
import sys
import time


def verify_forward(timestamp, signature, raw_body, secrets, tolerance_s=300):
    """The event (a dict) of a genuine, fresh forward of the sidecar; ValueError otherwise.
    timestamp, signature: the x-consent-sidecar-timestamp and x-consent-sidecar-signature headers
    (None when absent or given twice); raw_body: the body's bytes as received, before any parsing;
    secrets: the lines of the app signing secret file (any one may have signed: rotation)."""
    if not timestamp or not signature:
        raise ValueError("signature headers missing or repeated")
    if not re.fullmatch(r"[0-9]{1,12}", timestamp) or not re.fullmatch(r"v1=[0-9a-f]{64}", signature):
        raise ValueError("malformed signature headers")
    if abs(int(time.time()) - int(timestamp)) > tolerance_s:
        raise ValueError("timestamp outside the tolerance")
    signed = timestamp.encode() + b"." + raw_body
    given = bytes.fromhex(signature[3:])
    # Every secret is compared, in constant time, even after a match.
    if not any([hmac.compare_digest(hmac.new(s.encode(), signed, hashlib.sha256).digest(), given) for s in secrets]):
        raise ValueError("signature mismatch")
    event = json.loads(raw_body.decode("utf-8"))
    if not isinstance(event, dict) or not isinstance(event.get("id"), str) or not isinstance(event.get("type"), str):
        raise ValueError("not an event")
    return event


class _Webhooks(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            event = verify_forward(self._once("x-consent-sidecar-timestamp"), self._once("x-consent-sidecar-signature"), raw, SECRETS)
        except ValueError as e:
            print("refused", e, flush=True)
            self.send_response(401)
        else:
            print("verified", event["id"], event["type"], flush=True)  # handle it, idempotent by event["id"]
            self.send_response(204)
        self.end_headers()

    def _once(self, name):
        values = self.headers.get_all(name) or []
        return values[0] if len(values) == 1 else None

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    with open(sys.argv[2]) as f:
        SECRETS = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), _Webhooks)
    print("listening", server.server_address[1], flush=True)
    server.serve_forever()
