#!/usr/bin/env python3
"""Records the real server's answers to POST /sync/replay (see NOTES.md).

usage: record.py WORKDIR PORT_A PORT_B OUT.json
Two `opencode serve` run from start-opencode-serve.sh: A on WORKDIR/a at
PORT_A (the source: its sessions are made here and exported with
/sync/history), B on WORKDIR/b at PORT_B (fresh: every step is sent to it).
Both answer prompts with the stub model (ocbench -stub-only: the prompt is
echoed, call:NAME {...} is a tool call, think: reasoning, then: the text
after the tool). Writes the source history and, per step, the request as
sent, the status, the body, the compare mode and, for a 500, the error
B's log gives its ref.
"""
import json, os, re, sys, time, urllib.error, urllib.parse, urllib.request

W, port_a, port_b, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
A, B = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
DIR_A, DIR_B = os.path.join(W, "a", "project"), os.path.join(W, "b", "project")


def call(base, method, path, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, method=method, data=data)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        resp = urllib.request.urlopen(req, timeout=60)
        status, text = resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text) if text.strip() else None
    except ValueError:
        return status, text


# The source sessions, on A.
open(os.path.join(DIR_A, "x.txt"), "w").write("hello\n")
_, s1 = call(A, "POST", "/session", {})
S1 = s1["id"]
call(A, "POST", f"/session/{S1}/message", {"parts": [{"type": "text", "text": "hello there"}]})
call(A, "POST", f"/session/{S1}/message", {"parts": [{"type": "text", "text":
     'think:pondering\ncall:read {"filePath":"' + os.path.join(DIR_A, "x.txt") + '"}\nthen: finished'}]})
# A v2 session made too soon after the start finds no model (its runner
# logs ModelNotSelectedError): a new one is tried until one answers.
Q = "?directory=" + urllib.parse.quote(DIR_A, safe="")
S2 = None
for _ in range(20):
    _, s2 = call(A, "POST", "/api/session" + Q, {})
    call(A, "POST", f"/api/session/{s2['data']['id']}/prompt" + Q, {"prompt": {"text": "hi v2"}})
    for _ in range(30):
        _, h = call(A, "POST", "/sync/history", {})
        if any(e["aggregate_id"] == s2["data"]["id"] and e["type"].startswith("session.next.step.ended") for e in h):
            S2 = s2["data"]["id"]
            break
        time.sleep(0.1)
    if S2:
        break
    time.sleep(2)
time.sleep(1)  # the title request of S2
_, source = call(A, "POST", "/sync/history", {})


def events_of(sid):
    return [{"id": e["id"], "aggregateID": e["aggregate_id"], "seq": e["seq"], "type": e["type"], "data": e["data"]}
            for e in source if e["aggregate_id"] == sid]


def copy(v):
    return json.loads(json.dumps(v))


ev1, ev2 = events_of(S1), events_of(S2)
last1 = len(ev1) - 1


def replay(events):
    return {"directory": DIR_B, "events": events}


one = lambda **kw: [dict({"id": "evt_1", "aggregateID": "ses_x", "seq": 0, "type": "nope.1", "data": {}}, **kw)]


def raw_one(field, value):
    # One event with field set to the raw JSON value.
    return ('{"directory":"d","events":[{"id":"evt_1","aggregateID":"ses_x","seq":0,"type":"nope.1","data":{}}]}'
            .replace(f'"{field}":' + {"seq": "0", "data": "{}", "id": '"evt_1"'}[field], f'"{field}":{value}').encode())


# A session of its own, made from S1's first event.
def renamed(e, sid, eid):
    e = copy(e)
    e["aggregateID"] = e["data"]["sessionID"] = sid
    if "info" in e["data"] and e["type"].startswith("session."):
        e["data"]["info"]["id"] = sid
    if "info" in e["data"] and e["type"].startswith("message."):
        e["data"]["info"]["sessionID"] = sid
    e["id"] = eid
    return e


NEW = S1[:-3] + "NEW"
MSG = S1[:-3] + "MSG"
diverged = copy(ev1[last1])
diverged["data"]["info"]["agent"] = "plan"
diverged_id = copy(ev1[last1])
diverged_id["id"] = ev1[last1]["id"][:-1] + ("A" if ev1[last1]["id"][-1] != "A" else "B")
appended = copy(ev1[last1 - 1] if ev1[last1 - 1]["type"] == "session.updated.1" else
                next(e for e in reversed(ev1) if e["type"] == "session.updated.1"))
appended["seq"], appended["id"] = last1 + 1, "evt_" + "f" * 12 + "aaaaaaaaaaaaaa"
appended["data"]["info"]["title"] = "replayed title"
mismatch = copy(ev1[0])
mismatch["aggregateID"] = S1[:-3] + "ZZZ"
first_msg = renamed(next(e for e in ev1 if e["type"] == "message.updated.1"), MSG, "evt_" + "e" * 12 + "bbbbbbbbbbbbbb")
first_msg["seq"] = 0
partial = [renamed(ev1[0], NEW, "evt_" + "e" * 12 + "cccccccccccccc"),
           {"id": "evt_" + "e" * 12 + "dddddddddddddd", "aggregateID": NEW, "seq": 1, "type": "session.updated.1", "data": {}}]
deleted = lambda seq: {"id": "evt_2", "aggregateID": "ses_x", "seq": seq, "type": "session.deleted.1", "data": {"sessionID": "ses_x"}}
info_x = dict(copy(ev1[0]["data"]["info"]), id="ses_x")
deleted_info = lambda seq: dict(deleted(seq), data={"sessionID": "ses_x", "info": info_x})
head = next(i for i, e in enumerate(ev2) if e["type"].startswith("session.next.text.started")) + 1

# name, method, path, body (JSON) or raw (bytes), compare (see NOTES.md)
steps = [
    ("bad_nobody", "POST", "/sync/replay", None, b"", "exact"),
    ("bad_garbage", "POST", "/sync/replay", None, b"nope", "ours"),
    ("bad_array", "POST", "/sync/replay", [], None, "exact"),
    ("bad_null", "POST", "/sync/replay", None, b"null", "exact"),
    ("bad_empty", "POST", "/sync/replay", {}, None, "exact"),
    ("bad_directory_number", "POST", "/sync/replay", {"directory": 1, "events": []}, None, "exact"),
    ("bad_directory_null", "POST", "/sync/replay", {"directory": None, "events": []}, None, "exact"),
    ("bad_directory_object", "POST", "/sync/replay", {"directory": {"a": 1}, "events": []}, None, "exact"),
    ("bad_no_events", "POST", "/sync/replay", {"directory": "d"}, None, "exact"),
    ("bad_events_object", "POST", "/sync/replay", {"directory": "d", "events": {}}, None, "exact"),
    ("bad_events_string", "POST", "/sync/replay", {"directory": "d", "events": "x"}, None, "exact"),
    ("bad_events_empty", "POST", "/sync/replay", {"directory": "d", "events": []}, None, "exact"),
    ("bad_event_number", "POST", "/sync/replay", {"directory": "d", "events": [1]}, None, "exact"),
    ("bad_event_empty", "POST", "/sync/replay", {"directory": "d", "events": [{}]}, None, "exact"),
    ("bad_second_event", "POST", "/sync/replay", {"directory": "d", "events": one() + [5]}, None, "exact"),
    ("bad_second_event_id_only", "POST", "/sync/replay", {"directory": "d", "events": one() + [{"id": "evt_2"}]}, None, "exact"),
    ("bad_id_number", "POST", "/sync/replay", {"directory": "d", "events": one(id=1)}, None, "exact"),
    ("bad_id_prefix", "POST", "/sync/replay", {"directory": "d", "events": one(id="x")}, None, "exact"),
    ("bad_aggregate_number", "POST", "/sync/replay", {"directory": "d", "events": one(aggregateID=1)}, None, "exact"),
    ("bad_seq_negative", "POST", "/sync/replay", None, raw_one("seq", "-1"), "exact"),
    ("bad_seq_fraction", "POST", "/sync/replay", None, raw_one("seq", "1.5"), "exact"),
    ("bad_seq_negative_fraction", "POST", "/sync/replay", None, raw_one("seq", "-1.5"), "exact"),
    ("bad_seq_huge", "POST", "/sync/replay", None, raw_one("seq", "1e300"), "exact"),
    ("bad_seq_string", "POST", "/sync/replay", None, raw_one("seq", '"0"'), "exact"),
    ("bad_seq_bool", "POST", "/sync/replay", None, raw_one("seq", "true"), "exact"),
    ("bad_type_number", "POST", "/sync/replay", {"directory": "d", "events": one(type=5)}, None, "exact"),
    ("bad_data_array", "POST", "/sync/replay", None, raw_one("data", "[]"), "exact"),
    ("bad_data_null", "POST", "/sync/replay", None, raw_one("data", "null"), "exact"),
    ("bad_data_string", "POST", "/sync/replay", None, raw_one("data", '"str"'), "exact"),
    ("bad_no_data", "POST", "/sync/replay", None,
     b'{"directory":"d","events":[{"id":"evt_1","aggregateID":"ses_x","seq":0,"type":"nope.1"}]}', "exact"),
    ("unknown_type", "POST", "/sync/replay", {"directory": "d", "events": one()}, None, "ours"),
    ("unknown_type_extra_keys", "POST", "/sync/replay", {"directory": "d", "extra": 1, "events": [dict(one()[0], extra=1)]}, None, "ours"),
    ("mixed_aggregates", "POST", "/sync/replay", {"directory": "d", "events": [deleted(0), dict(deleted(1), aggregateID="ses_y")]}, None, "ours"),
    ("seq_gap", "POST", "/sync/replay", {"directory": "d", "events": [deleted(0), deleted(2)]}, None, "ours"),
    ("deleted_without_info", "POST", "/sync/replay", {"directory": "d", "events": [deleted(1)]}, None, "ours"),
    ("new_session_from_seq_1", "POST", "/sync/replay", {"directory": "d", "events": [deleted_info(1)]}, None, "ours"),
    ("data_without_session", "POST", "/sync/replay", {"directory": "d", "events": [dict(deleted(0), data={})]}, None, "ours"),
    ("message_before_session", "POST", "/sync/replay", replay([first_msg]), None, "ours"),
    ("message_before_session_get", "GET", f"/session/{MSG}", None, None, "exact"),
    ("partial", "POST", "/sync/replay", replay(partial), None, "ours"),
    ("partial_get", "GET", f"/session/{NEW}", None, None, "ours"),
    ("replay_v1", "POST", "/sync/replay", replay(ev1), None, "exact"),
    ("v1_session", "GET", f"/session/{S1}", None, None, "session"),
    ("v1_messages", "GET", f"/session/{S1}/message", None, None, "messages"),
    ("v1_messages_v2", "GET", f"/api/session/{S1}/message", None, None, "ours"),
    ("v1_history_v2", "GET", f"/api/session/{S1}/history", None, None, "exact"),
    ("replay_v1_again", "POST", "/sync/replay", replay(ev1), None, "exact"),
    ("replay_v1_tail", "POST", "/sync/replay", replay(ev1[last1 - 2:]), None, "exact"),
    ("diverged_data", "POST", "/sync/replay", replay([diverged]), None, "ours"),
    ("diverged_id", "POST", "/sync/replay", replay([diverged_id]), None, "ours"),
    ("aggregate_mismatch", "POST", "/sync/replay", replay([mismatch]), None, "ours"),
    ("replay_v1_append", "POST", "/sync/replay", replay([ev1[last1], appended]), None, "exact"),
    ("v1_session_appended", "GET", f"/session/{S1}", None, None, "session"),
    ("replay_v2_head", "POST", "/sync/replay", replay(ev2[:head]), None, "exact"),
    ("v2_messages_head", "GET", f"/api/session/{S2}/message", None, None, "v2messages"),
    ("replay_v2_rest", "POST", "/sync/replay", replay(ev2[head - 1:]), None, "exact"),
    ("v2_messages", "GET", f"/api/session/{S2}/message", None, None, "v2messages"),
    ("v2_messages_v1", "GET", f"/session/{S2}/message", None, None, "ours"),
    ("v2_history", "GET", f"/api/session/{S2}/history", None, None, "exact"),
    ("v2_session", "GET", f"/session/{S2}", None, None, "session"),
    ("history", "POST", "/sync/history", {}, None, "history"),
]

log = os.path.join(W, "b", "serve.log")
entries = []
for name, method, path, body, raw, compare in steps:
    status, resp = call(B, method, path, body, raw)
    sent = raw.decode() if raw is not None else (json.dumps(body) if body is not None else None)
    entry = {"name": name, "method": method, "path": path, "body": sent, "status": status, "response": resp,
             "compare": compare}
    if status == 500 and isinstance(resp, dict):
        time.sleep(0.2)
        ref = resp.get("data", {}).get("ref", "")
        m = re.search(r'ref=' + re.escape(ref) + r' error="((?:[^"\\]|\\.)*)"', open(log).read())
        if m:
            entry["error"] = m.group(1).encode().decode("unicode_escape")
    entries.append(entry)
    print(f"{name}: {status} {json.dumps(resp)[:140]}", file=sys.stderr)
json.dump({"source": source, "sessions": {"v1": S1, "v2": S2}, "entries": entries}, open(out, "w"), indent=1,
          ensure_ascii=False)
