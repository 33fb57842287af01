#!/usr/bin/env python3
"""Record what opencode serve 1.18.33 answers on the v2 integration, credential,
agent, command and reference routes (NOTES.md says how; answers.json is the output).

usage: record.py OPENCODE_BINARY PORT [OUT]
"""
import json, os, re, shutil, subprocess, sys, tempfile, threading, time, urllib.request, urllib.error

HERE = os.path.dirname(os.path.abspath(__file__))
BIN, PORT = sys.argv[1], int(sys.argv[2])
OUT = sys.argv[3] if len(sys.argv) > 3 else os.path.join(HERE, "answers.json")
BASE = f"http://127.0.0.1:{PORT}"

ROOT = tempfile.mkdtemp(prefix="intrec-")
HOME = os.path.join(ROOT, "home")
PROJECT = os.path.join(ROOT, "project")
layout = json.load(open(os.path.join(HERE, "layout.json")))
for rel, content in layout["files"].items():
    p = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content, indent=2))
for d in ["home/.local/share", "home/.local/state", "home/.cache"]:
    os.makedirs(os.path.join(ROOT, d), exist_ok=True)
shutil.copy(os.path.join(HERE, "..", "catalog", "api.json"), os.path.join(ROOT, "api.json"))

env = {"PATH": "/usr/bin:/bin", "HOME": HOME, "XDG_CONFIG_HOME": HOME + "/.config",
       "XDG_DATA_HOME": HOME + "/.local/share", "XDG_STATE_HOME": HOME + "/.local/state",
       "XDG_CACHE_HOME": HOME + "/.cache", "OPENCODE_MODELS_PATH": ROOT + "/api.json",
       "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
       "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
env.update(layout["env"])
log = open(os.path.join(ROOT, "serve.log"), "w")
proc = subprocess.Popen([BIN, "serve", "--hostname", "127.0.0.1", "--port", str(PORT), "--print-logs"],
                        cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)


def call(method, path, body=None):
    data = body.encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("x-opencode-directory", PROJECT)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def poll(cond, what, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("timed out: " + what)


try:
    poll(lambda: call("GET", "/global/health")[0] == 200, "health")
    # The v2 registries fill in stages after an instance starts: read until
    # every listing is unchanged for 2 s.
    reads = ["/api/integration", "/api/agent", "/api/command", "/api/reference"]
    state = {"last": None, "since": time.time()}

    def settled():
        cur = [call("GET", p) for p in reads]
        if cur != state["last"]:
            state["last"], state["since"] = cur, time.time()
        return time.time() - state["since"] >= 2 and json.loads(cur[0][1])["data"]
    poll(settled, "settle", 60)

    events = []
    def listen():
        req = urllib.request.Request(BASE + "/event")
        req.add_header("x-opencode-directory", PROJECT)
        with urllib.request.urlopen(req) as r:
            for line in r:
                line = line.decode().strip()
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
    threading.Thread(target=listen, daemon=True).start()
    poll(lambda: any(e["type"] == "server.connected" for e in events), "event stream")

    cred = {}
    answers = []
    for step in layout["steps"]:
        path = step["path"]
        if "{cred}" in path:
            path = path.replace("{cred}", cred["id"])
        status, text = call(step["method"], path, step.get("body"))
        body = json.loads(text) if text else None
        if step.get("remember"):
            conns = [c for c in body["data"]["connections"] if c["type"] == "credential"]
            cred["id"] = conns[0]["id"] if conns else "cred_gone"
        answers.append({"name": step["name"], "method": step["method"], "path": step["path"],
                        "body": step.get("body"), "status": status, "response": body})
    want = sum(s.get("events", 0) for s in layout["steps"])
    poll(lambda: len([e for e in events if e["type"].startswith("integration.")]) >= want, "events", 10)
    got = [{"type": e["type"], "properties": e["properties"]} for e in events if e["type"].startswith("integration.")]
finally:
    proc.terminate()
    proc.wait(10)

out = json.dumps({"opencode": "1.18.33", "answers": answers, "events": got}, indent=2, ensure_ascii=False)
out = out.replace(ROOT, "<ROOT>")
out = re.sub(r'cred_[0-9a-f]{12}[0-9A-Za-z]{14}', "<cred>", out)
out = re.sub(r'"err_[0-9a-f]{8}"', '"<err_ref>"', out)
open(OUT, "w").write(out + "\n")
shutil.rmtree(ROOT)
print("wrote", OUT, len(answers), "answers,", len(got), "events")
