#!/usr/bin/env python3
"""Records the real server's answers to steps.json's requests.

usage: record.py RUN WORKDIR PORT OUT.json
RUN is "off" or "on" (the run of steps.json); WORKDIR the one
start-opencode-serve.sh was given, after setup.sh built its directories
(before the server started: its cwd is WORKDIR/project). Writes one entry
per step: the request as sent, the status, the Content-Type, the body (JSON
when it parses, else text) and the values captured from it; and
WORKDIR/global_event.sse is curl -N /global/event over the run.
"""
import json, os, re, subprocess, sys, time, urllib.parse, urllib.request, urllib.error

run, W, port, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
steps = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.json")))[run]
base = f"http://127.0.0.1:{port}"
vals = {"W": W}
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="ref", GIT_AUTHOR_EMAIL="ref@example.com", GIT_COMMITTER_NAME="ref",
               GIT_COMMITTER_EMAIL="ref@example.com", GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")


def expand(s):
    def sub(m):
        enc, name = m.group(1), m.group(2)
        v = vals[name]
        return urllib.parse.quote(v, safe="") if enc else v
    return re.sub(r"\{(enc:)?([A-Za-z0-9]+)\}", sub, s)


def where(p):
    p = expand(p)
    return p if os.path.isabs(p) else os.path.join(W, p)


def before(actions):
    for a in actions:
        if a[0] == "write":
            path = where(a[1])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").write(a[2])
        elif a[0] == "rm":
            os.remove(where(a[1]))
        elif a[0] == "git":
            subprocess.run(["git", "-C", where(a[1])] + [expand(x) for x in a[2:]], check=True, env=GIT_ENV)


sse = subprocess.Popen(["curl", "-sN", base + "/global/event"], stdout=open(os.path.join(W, "global_event.sse"), "w"))
time.sleep(0.5)
entries = []
for st in steps:
    before(st.get("before", []))
    path = expand(st["path"])
    body = expand(st["body"]) if "body" in st else None
    req = urllib.request.Request(base + path, method=st["method"], data=body.encode() if body is not None else None)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    started = time.time()
    try:
        resp = urllib.request.urlopen(req, timeout=60)
        status, ctype, raw = resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as e:
        status, ctype, raw = e.code, e.headers.get("Content-Type", ""), e.read()
    took = round(time.time() - started, 2)
    text = raw.decode("utf-8", "replace")
    try:
        parsed = json.loads(text) if text.strip() else None
        kind = "json" if text.strip() else "empty"
    except ValueError:
        parsed, kind = text, "text"
    captured = {}
    for name, key in st.get("capture", {}).items():
        if isinstance(parsed, dict) and key in parsed:
            vals[name] = captured[name] = parsed[key]
    entries.append({"name": st["name"], "method": st["method"], "path": path, "body": body, "status": status,
                    "contentType": ctype, "kind": kind, "response": parsed, "captured": captured, "seconds": took})
    print(f"{st['name']}: {status} {text[:160]}", file=sys.stderr)
time.sleep(0.5)
sse.terminate()
json.dump({"run": run, "workdir": W, "values": vals, "entries": entries}, open(out, "w"), indent=1, ensure_ascii=False)
