"""Ask the consent sidecar whether an operation is allowed. Python 3, standard library only.

    python3 consent_check.py http://127.0.0.1:7700 alice marketing-email [timeout_ms]
    python3 consent_check.py unix:/var/run/cs/decision.sock alice marketing-email
"""
import http.client
import json
import socket
import sys
import time
import urllib.parse

MAX_BODY = 65536


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def _no_duplicates(pairs):
    # json.loads keeps the last of two members with one name: {"decision":"DENY","decision":"ALLOW"}
    # would read as ALLOW. A body that names a member twice, at any depth, is no answer.
    obj = {}
    for name, value in pairs:
        if name in obj:
            raise ValueError("member named twice: " + name)
        obj[name] = value
    return obj


def _no_constant(name):
    raise ValueError("not JSON: " + name)


def check(base_url, user_reference, config_key, timeout_s=2.0):
    """(allowed, kind, cause). allowed is True only for a 200 whose body is exactly
    {"decision":"ALLOW","configKey":<config_key>,"validUntil":<integer epoch ms, in the future>};
    then cause is validUntil. Anything else, an error or no answer included, is not allowed."""
    try:
        if base_url.startswith("unix:"):
            conn = _UnixConnection(base_url[len("unix:"):], timeout_s)
        else:
            url = urllib.parse.urlsplit(base_url)
            conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout_s)
        body = json.dumps({"userReference": user_reference, "configKey": config_key})
        try:
            conn.request("POST", "/v1/authorization/check", body, {"content-type": "application/json"})
            res = conn.getresponse()  # http.client never follows a redirect
            status, media = res.status, res.getheader("content-type", "").split(";")[0].strip().lower()
            raw = res.read(MAX_BODY + 1)
        finally:
            conn.close()
    except (OSError, http.client.HTTPException) as e:
        return (False, "unavailable", type(e).__name__)
    if len(raw) > MAX_BODY:
        return (False, "unexpected_answer", "body_too_large")
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ValueError:
        doc = None
    if status == 503:
        cause = doc.get("error") if isinstance(doc, dict) else None
        return (False, "no_decision", cause if isinstance(cause, str) else "unspecified")
    if status == 400:
        return (False, "invalid_request", "invalid_request")
    if status != 200:
        return (False, "unexpected_answer", "status %d" % status)
    if media != "application/json" or not isinstance(doc, dict):
        return (False, "unexpected_answer", "not_json")
    members = set(doc)
    if doc.get("decision") == "ALLOW" and members == {"decision", "configKey", "validUntil"}:
        valid_until = doc["validUntil"]
        if doc["configKey"] != config_key:
            return (False, "unexpected_answer", "other_config_key")
        if type(valid_until) is not int or not 0 < valid_until <= 2**53 - 1:
            return (False, "unexpected_answer", "malformed")
        if valid_until <= time.time() * 1000:
            return (False, "unexpected_answer", "expired")
        return (True, "allow", valid_until)
    if doc.get("decision") == "DENY" and members == {"decision", "configKey"} and doc["configKey"] == config_key:
        return (False, "deny", "evaluated")
    if doc.get("decision") == "DENY" and members == {"decision", "reason"} and isinstance(doc["reason"], str) and doc["reason"]:
        return (False, "deny", doc["reason"])
    return (False, "unexpected_answer", "malformed")


if __name__ == "__main__":
    timeout_s = int(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 2.0
    allowed, kind, cause = check(sys.argv[1], sys.argv[2], sys.argv[3], timeout_s)
    print("allowed %d" % cause if allowed else "not_allowed %s %s" % (kind, cause))
    sys.exit(0 if allowed else 1)
