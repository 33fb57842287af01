#!/usr/bin/env python3
"""Records the /pty routes of a real `opencode serve` 1.18.33 into cases.jsonl.

usage: record.py URL PROJECT_DIR [PASSWORD]
  URL          a server started by /work/shared/reference/start-opencode-serve.sh
  PROJECT_DIR  its project directory (written /PROJECT in the recording)
  PASSWORD     if the server has OPENCODE_SERVER_PASSWORD: record the auth cases instead
Websockets go through ws.mjs (node --experimental-websocket).
Each line: {name, method, path, headers, body, status, response} with {id} for the
terminal the case is about; response is the parsed JSON (or the text) with the
project directory as /PROJECT. Websocket cases add frames: the messages received.
"""
import base64, json, os, subprocess, sys, time, urllib.request, urllib.error

URL, PROJECT = sys.argv[1], sys.argv[2]
PASSWORD = sys.argv[3] if len(sys.argv) > 3 else None
HERE = os.path.dirname(os.path.abspath(__file__))
out = []

def call(method, path, body=None, headers=None, auth=True):
    h = dict(headers or {})
    if PASSWORD and auth:
        h["Authorization"] = "Basic " + base64.b64encode(b"opencode:" + PASSWORD.encode()).decode()
    data = body.encode() if isinstance(body, str) else None
    if data is not None:
        h.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(URL + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def norm(text):
    text = text.replace(PROJECT, "/PROJECT")
    try:
        return json.loads(text)
    except ValueError:
        return text[:200]

def case(name, method, path, body=None, headers=None, auth=True, id=""):
    status, text = call(method, path.replace("{id}", id), body, headers, auth)
    out.append({"name": name, "method": method, "path": path, "headers": headers or {}, "body": body,
                "auth": auth, "status": status, "response": norm(text)})
    return status, norm(text)

def ws(name, path, inputs=(), wait=2500, id=""):
    env = dict(os.environ, WAIT=str(wait))
    p = subprocess.run(["node", "--experimental-websocket", os.path.join(HERE, "ws.mjs"),
                        URL.replace("http", "ws") + path.replace("{id}", id)] + list(inputs),
                       capture_output=True, text=True, env=env)
    frames = json.loads(p.stdout.replace(PROJECT, "/PROJECT"))
    out.append({"name": name, "method": "GET", "path": path, "websocket": True, "inputs": list(inputs), "frames": frames})
    return frames

def create(body='{"command":"/bin/sh"}'):
    return json.loads(call("POST", "/pty", body)[1])["id"]

for q in ("", "?directory=/tmp"):
    for t in json.loads(call("GET", "/pty" + q)[1] or "[]"):
        call("DELETE", "/pty/" + t["id"] + q)

if PASSWORD:
    id = create()
    case("auth/no password", "GET", "/pty", auth=False)
    case("auth/no password get", "GET", "/pty/{id}", auth=False, id=id)
    token = base64.b64encode(b"opencode:" + PASSWORD.encode()).decode()
    ws("auth/auth_token on the websocket", "/pty/{id}/connect?auth_token=" + token, id=id)
    case("auth/auth_token on GET /pty", "GET", "/pty?auth_token=" + token, auth=False)
    case("auth/wrong auth_token", "GET", "/pty/{id}/connect?auth_token=" + base64.b64encode(b"opencode:no").decode(), auth=False, id=id)
    case("auth/no credentials on the websocket", "GET", "/pty/{id}/connect", auth=False, id=id)
    _, tok = case("ticket/issue", "POST", "/pty/{id}/connect-token", headers={"x-opencode-ticket": "1"}, id=id)
    ws("ticket/websocket with it", "/pty/{id}/connect?ticket=" + tok["ticket"], id=id)
    ws("ticket/used twice", "/pty/{id}/connect?ticket=" + tok["ticket"], id=id)
    case("ticket/unknown", "GET", "/pty/{id}/connect?ticket=zzz", auth=False, id=id)
    case("ticket/other route", "GET", "/pty?ticket=zzz", auth=False)
    case("ticket/no password", "POST", "/pty/{id}/connect-token", headers={"x-opencode-ticket": "1"}, auth=False, id=id)
else:
    case("list/empty", "GET", "/pty")
    _, info = case("create/default shell", "POST", "/pty", "{}")
    id1 = info["id"]
    _, info = case("create/command title env", "POST", "/pty", '{"command":"/bin/sh","args":[],"title":"T1","env":{"FOO":"bar"}}')
    id2 = info["id"]
    case("create/unknown key", "POST", "/pty", '{"command":"/bin/sh","extra":1}')
    case("create/in a directory", "POST", "/pty?directory=/tmp", '{"command":"/bin/sh"}')
    case("get", "GET", "/pty/{id}", id=id2)
    case("update", "PUT", "/pty/{id}", '{"title":"Mine","size":{"rows":30,"cols":100}}', id=id2)
    case("update/empty title keeps it", "PUT", "/pty/{id}", '{"title":""}', id=id2)
    case("update/size only", "PUT", "/pty/{id}", '{"size":{"rows":40,"cols":120}}', id=id2)
    case("list/two", "GET", "/pty")
    case("list/other directory", "GET", "/pty?directory=/tmp")
    case("get/other directory", "GET", "/pty/{id}?directory=/tmp", id=id2)
    case("shells", "GET", "/pty/shells")
    case("delete", "DELETE", "/pty/{id}", id=id1)
    case("delete/again", "DELETE", "/pty/{id}", id=id1)
    case("get/deleted", "GET", "/pty/{id}", id=id1)
    for name, method, path, body in [
        ("bad/unknown id get", "GET", "/pty/pty_nosuch", None),
        ("bad/unknown id update", "PUT", "/pty/pty_nosuch", '{"title":"x"}'),
        ("bad/unknown id delete", "DELETE", "/pty/pty_nosuch", None),
        ("bad/unknown id connect-token", "POST", "/pty/pty_nosuch/connect-token", None),
        ("bad/wrong prefix get", "GET", "/pty/abc", None),
        ("bad/wrong prefix delete", "DELETE", "/pty/abc", None),
        ("bad/create malformed JSON", "POST", "/pty", "{bad"),
        ("bad/create empty body", "POST", "/pty", ""),
        ("bad/create command number", "POST", "/pty", '{"command":5}'),
        ("bad/create args string", "POST", "/pty", '{"args":"x"}'),
        ("bad/create env number", "POST", "/pty", '{"env":{"A":1}}'),
        ("bad/create title array", "POST", "/pty", '{"title":[]}'),
        ("bad/update rows 0", "PUT", "/pty/{id}", '{"size":{"rows":0,"cols":10}}'),
        ("bad/update cols missing", "PUT", "/pty/{id}", '{"size":{"rows":10}}'),
        ("bad/update rows 1.5", "PUT", "/pty/{id}", '{"size":{"rows":1.5,"cols":10}}'),
        ("bad/update rows string", "PUT", "/pty/{id}", '{"size":{"rows":"10","cols":10}}'),
        ("bad/update cols negative", "PUT", "/pty/{id}", '{"size":{"rows":10,"cols":-1}}'),
        ("bad/update malformed JSON", "PUT", "/pty/{id}", "{bad"),
        ("bad/update empty body", "PUT", "/pty/{id}", ""),
        ("bad/update title number", "PUT", "/pty/{id}", '{"title":5}'),
    ]:
        case(name, method, path, body, id=id2)
    case("connect-token/without the header", "POST", "/pty/{id}/connect-token", id=id2)
    case("connect-token/issue", "POST", "/pty/{id}/connect-token", headers={"x-opencode-ticket": "1"}, id=id2)
    case("connect-token/foreign origin", "POST", "/pty/{id}/connect-token", headers={"x-opencode-ticket": "1", "Origin": "https://evil.example"}, id=id2)
    case("connect-token/loopback origin", "POST", "/pty/{id}/connect-token", headers={"x-opencode-ticket": "1", "Origin": "http://localhost:3000"}, id=id2)
    case("connect/not a websocket", "GET", "/pty/{id}/connect", id=id2)
    case("connect/unknown id", "GET", "/pty/pty_nosuch/connect")
    id3 = create()
    ws("websocket/echo hi", "/pty/{id}/connect", ["echo hi\n"], wait=3000, id=id3)
    for c in ["", "?cursor=2", "?cursor=-1", "?cursor=7", "?cursor=999", "?cursor=abc", "?cursor=-5", "?cursor=1.5"]:
        ws("websocket/reconnect cursor" + (c or " none"), "/pty/{id}/connect" + c, id=id3)
    id4 = create('{"command":"/bin/sh","args":["-c","sleep 0.2; printf \\"\\\\303\\\\251\\\\360\\\\237\\\\230\\\\200\\"; sleep 100"]}')
    time.sleep(1.5)
    for c in ["?cursor=0", "?cursor=1", "?cursor=2", "?cursor=3"]:
        ws("websocket/utf-16 cursor" + c, "/pty/{id}/connect" + c, id=id4)
    id5 = create('{"command":"/bin/sh","args":["-c","sleep 3; echo bye; exit 3"]}')
    ws("websocket/process exits", "/pty/{id}/connect", wait=6000, id=id5)
    case("exited/get", "GET", "/pty/{id}", id=id5)
    case("exited/delete", "DELETE", "/pty/{id}", id=id5)
    case("exited/connect", "GET", "/pty/{id}/connect", id=id5)
    for q in ("", "?directory=/tmp"):
        for t in json.loads(call("GET", "/pty" + q)[1] or "[]"):
            call("DELETE", "/pty/" + t["id"] + q)

sys.stdout.write("".join(json.dumps(c) + "\n" for c in out))
