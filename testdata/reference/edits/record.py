#!/usr/bin/env python3
"""Records the real server's answers to the conversation edits, reverts and
permission replies (see NOTES.md).

usage: record.py PORT PROJECT OUT.json
An `opencode serve` from start-opencode-serve.sh on PORT whose project
directory PROJECT is a git repository with a.txt ("hello") and an
opencode.json of {"permission":{"edit":"ask"}}, its model the stub of
NOTES.md ("slow:" in a prompt streams the reply over ten seconds).

Each step is kept with its request as a template ({NAME} is a value an
earlier step bound, {DIR} the project), the status, the body and the /event
frames of the types it watches; the test (routes/edits_reference_test.go)
sends the same steps to ours, binds the same names from its own answers
and compares.
"""
import json, os, re, sys, threading, time, urllib.error, urllib.parse, urllib.request

port, DIR, out = sys.argv[1], sys.argv[2], sys.argv[3]
B = f"http://127.0.0.1:{port}"
EVENTS = []


def listen():
    r = urllib.request.urlopen(B + "/event", timeout=3600)
    for line in r:
        line = line.decode()
        if line.startswith("data: "):
            EVENTS.append(json.loads(line[6:]))


threading.Thread(target=listen, daemon=True).start()
time.sleep(0.5)
VARS = {"DIR": DIR}
STEPS = []
SINCE = [0]  # a wait looks at the events from the last request on


def subst(s):
    return re.sub(r"\{([A-Z][A-Z0-9]*)\}", lambda m: VARS[m.group(1)], s)


def dig(v, expr):
    # a.b[2].c, or [key=value] for the first item with that value
    for tok in re.findall(r"[^.\[\]]+|\[[^\]]*\]", expr):
        if tok.startswith("["):
            inner = tok[1:-1]
            if "=" in inner:
                k, want = inner.split("=", 1)
                v = next(x for x in v if str(dig(x, k)) == want)
            else:
                v = v[int(inner)]
        else:
            v = v[tok]
    return v


def session_of(e):
    p = e.get("properties", {})
    return p.get("sessionID") or p.get("info", {}).get("sessionID") or p.get("part", {}).get("sessionID")


def http(name, method, path, body=None, raw=None, bind=None, watch=(), compare="exact", session="", file=None):
    path_s = subst(path)
    text = raw if raw is not None else (json.dumps(body) if body is not None else None)
    data = subst(text).encode() if text is not None else None
    req = urllib.request.Request(B + path_s, method=method, data=data)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    n = SINCE[0] = len(EVENTS)
    try:
        resp = urllib.request.urlopen(req, timeout=60)
        status, out_text = resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        status, out_text = e.code, e.read().decode()
    try:
        answer = json.loads(out_text) if out_text.strip() else None
    except ValueError:
        answer = out_text
    time.sleep(1.0 if watch else 0.2)  # the step's events (the test waits for a marker instead)
    sid = subst(session) if session else ""
    frames = [e for e in EVENTS[n:] if e["type"] in watch and (not sid or session_of(e) == sid)]
    for k, expr in (bind or {}).items():
        VARS[k] = dig(answer, expr)
    step = {"name": name, "do": "http", "method": method, "path": path, "body": text, "status": status,
            "response": answer, "compare": compare, "watch": list(watch), "session": session, "bind": bind or {},
            "events": frames}
    if file:
        step["file"] = {file: open(os.path.join(DIR, file)).read()}
    STEPS.append(step)
    print(f"{name}: {status} {out_text[:160]}", file=sys.stderr)


def wait(name, type, session, bind=None):
    sid = subst(session)
    for _ in range(300):
        hit = [e for e in EVENTS[SINCE[0]:] if e["type"] == type and session_of(e) == sid and not e.get("_used")]
        if hit:
            break
        time.sleep(0.1)
    else:
        raise SystemExit(f"{name}: no {type}")
    hit[0]["_used"] = True
    frame = {k: v for k, v in hit[0].items() if k != "_used"}
    for k, expr in (bind or {}).items():
        VARS[k] = dig(frame, expr)
    STEPS.append({"name": name, "do": "wait", "type": type, "session": session, "bind": bind or {}, "event": frame})


def idle(name, session):
    sid = subst(session)
    for _ in range(600):
        with urllib.request.urlopen(B + "/session/status") as r:
            if sid not in json.load(r):
                break
        time.sleep(0.1)
    else:
        raise SystemExit(f"{name}: never idle")
    time.sleep(1.5)  # OpenCode's title and diff summary come after its idle
    STEPS.append({"name": name, "do": "idle", "session": session})


def prompt(text):
    return {"parts": [{"type": "text", "text": text}]}


def edit(old, new, key="filePath"):
    return 'call:edit {"%s":"{DIR}/a.txt","oldString":"%s","newString":"%s"} then: edited' % (key, old, new)


Z = "zzzzzzzzzzzzzzzzzzzzzzzzzz"
open(os.path.join(DIR, "a.txt"), "w").write("hello\n")

# 1. Part edits on an idle session.
http("parts_session", "POST", "/session", {}, bind={"PS": "id"}, compare="none")
http("parts_prompt", "POST", "/session/{PS}/message", prompt("hello there"), compare="none")
idle("parts_idle", "{PS}")
http("parts_messages", "GET", "/session/{PS}/message", compare="messages",
     bind={"PU1": "[0].info.id", "PU1P": "[0].parts[0].id", "PA1": "[1].info.id", "PA1T": "[1].parts[type=text].id"})
part = {"id": "{PU1P}", "sessionID": "{PS}", "messageID": "{PU1}", "type": "text", "text": "edited text"}
watch_part = ("message.part.updated",)
http("patch_text", "PATCH", "/session/{PS}/message/{PU1}/part/{PU1P}", part, watch=watch_part, session="{PS}")
http("patch_new_part", "PATCH", "/session/{PS}/message/{PU1}/part/prt_" + Z, dict(part, id="prt_" + Z, text="added"),
     watch=watch_part, session="{PS}")
http("patch_other_id", "PATCH", "/session/{PS}/message/{PU1}/part/{PU1P}", dict(part, id="prt_" + Z), watch=watch_part,
     session="{PS}", compare="ours")
http("patch_other_message", "PATCH", "/session/{PS}/message/{PU1}/part/{PU1P}", dict(part, messageID="{PA1}"),
     watch=watch_part, session="{PS}", compare="ours")
http("patch_unknown_message", "PATCH", "/session/{PS}/message/msg_" + Z + "/part/{PU1P}", dict(part, messageID="msg_" + Z),
     watch=watch_part, session="{PS}", compare="ours")
http("patch_unknown_session", "PATCH", "/session/ses_nope/message/{PU1}/part/{PU1P}", dict(part, sessionID="ses_nope"))
http("patch_bad_type", "PATCH", "/session/{PS}/message/{PU1}/part/{PU1P}", dict(part, type="nope"), compare="error")
http("patch_no_body", "PATCH", "/session/{PS}/message/{PU1}/part/{PU1P}", compare="error")
http("patch_bad_part_id", "PATCH", "/session/{PS}/message/{PU1}/part/xyz", dict(part, id="xyz"), compare="error")
http("parts_messages_patched", "GET", "/session/{PS}/message", compare="messages")
watch_rm = ("message.part.removed", "message.removed")
http("delete_part", "DELETE", "/session/{PS}/message/{PA1}/part/{PA1T}", watch=watch_rm, session="{PS}")
http("delete_part_again", "DELETE", "/session/{PS}/message/{PA1}/part/{PA1T}", watch=watch_rm, session="{PS}")
http("delete_part_unknown_message", "DELETE", "/session/{PS}/message/msg_" + Z + "/part/{PA1T}", watch=watch_rm, session="{PS}")
http("delete_part_unknown_session", "DELETE", "/session/ses_nope/message/{PA1}/part/{PA1T}")
http("delete_part_bad_id", "DELETE", "/session/{PS}/message/{PA1}/part/xyz", compare="error")
http("delete_message", "DELETE", "/session/{PS}/message/{PA1}", watch=watch_rm, session="{PS}")
http("delete_message_again", "DELETE", "/session/{PS}/message/{PA1}", watch=watch_rm, session="{PS}")
http("delete_message_unknown_session", "DELETE", "/session/ses_nope/message/{PA1}")
http("delete_message_bad_id", "DELETE", "/session/{PS}/message/xyz", compare="error")
http("parts_messages_deleted", "GET", "/session/{PS}/message", compare="messages")

# 2. The same while a turn streams (a slow reply), then an abort.
http("busy_session", "POST", "/session", {}, bind={"BS": "id"}, compare="none")
http("busy_prompt1", "POST", "/session/{BS}/message", prompt("hello there"), compare="none")
idle("busy_idle1", "{BS}")
http("busy_prompt2", "POST", "/session/{BS}/prompt_async", prompt("slow: a long story"))
wait("busy_streaming", "message.part.delta", "{BS}")
http("busy_messages", "GET", "/session/{BS}/message", compare="none",
     bind={"BU2": "[2].info.id", "BU2P": "[2].parts[0].id", "BA1": "[1].info.id", "BA1T": "[1].parts[type=text].id",
           "BA2": "[3].info.id", "BA2T": "[3].parts[type=text].id"})
watch_rev = ("session.updated", "session.diff")
http("busy_revert", "POST", "/session/{BS}/revert", {"messageID": "{BU2}"}, watch=watch_rev, session="{BS}")
http("busy_unrevert", "POST", "/session/{BS}/unrevert", watch=watch_rev, session="{BS}")
http("busy_patch_user_text", "PATCH", "/session/{BS}/message/{BU2}/part/{BU2P}",
     {"id": "{BU2P}", "sessionID": "{BS}", "messageID": "{BU2}", "type": "text", "text": "edited while busy"},
     watch=watch_part, session="{BS}", compare="ours")
http("busy_patch_streaming_text", "PATCH", "/session/{BS}/message/{BA2}/part/{BA2T}",
     {"id": "{BA2T}", "sessionID": "{BS}", "messageID": "{BA2}", "type": "text", "text": "overwritten"},
     watch=watch_part, session="{BS}", compare="ours")
http("busy_delete_part", "DELETE", "/session/{BS}/message/{BA1}/part/{BA1T}", watch=watch_rm, session="{BS}", compare="ours")
http("busy_delete_message", "DELETE", "/session/{BS}/message/{BA1}", watch=watch_rm, session="{BS}")
http("busy_abort", "POST", "/session/{BS}/abort")
idle("busy_idle2", "{BS}")

# 3. A tool that asks (edit), replied over v1; reverts of its turn; rejects.
http("edit_session", "POST", "/session", {}, bind={"ES": "id"}, compare="none")
http("edit_prompt1", "POST", "/session/{ES}/prompt_async", prompt(edit("hello", "bye")))
wait("edit_asked1", "permission.asked", "{ES}", bind={"PER1": "properties.id"})
http("v1_list", "GET", "/permission", compare="asks")
http("v2_list_of_v1_ask", "GET", "/api/session/{ES}/permission", compare="ours")
http("v1_reply_unknown", "POST", "/permission/per_" + Z + "/reply", {"reply": "once"})
http("v1_reply_bad", "POST", "/permission/{PER1}/reply", {"reply": "maybe"}, compare="error")
http("v1_reply_no_body", "POST", "/permission/{PER1}/reply", compare="error")
http("v1_reply_bad_id", "POST", "/permission/xyz/reply", {"reply": "once"}, compare="error")
watch_perm = ("permission.replied", "permission.v2.replied")
http("v1_reply_once", "POST", "/permission/{PER1}/reply", {"reply": "once"}, watch=watch_perm, session="{ES}")
http("v1_reply_again", "POST", "/permission/{PER1}/reply", {"reply": "once"})
idle("edit_idle1", "{ES}")
http("edit_prompt2", "POST", "/session/{ES}/message", prompt("second"), compare="none", file="a.txt")
idle("edit_idle2", "{ES}")
http("edit_messages", "GET", "/session/{ES}/message", compare="messages",
     bind={"EU1": "[0].info.id", "EA1": "[1].info.id", "EA1TOOL": "[1].parts[type=tool].id",
           "EA1FIN": "[1].parts[type=step-finish].id", "EU2": "[3].info.id"})
http("revert_first", "POST", "/session/{ES}/revert", {"messageID": "{EU1}"}, watch=watch_rev, session="{ES}",
     compare="session", file="a.txt")
http("revert_second_on_top", "POST", "/session/{ES}/revert", {"messageID": "{EU2}"}, watch=watch_rev, session="{ES}",
     compare="session", file="a.txt")
http("revert_messages", "GET", "/session/{ES}/message", compare="messages")
http("unrevert", "POST", "/session/{ES}/unrevert", watch=watch_rev, session="{ES}", compare="session", file="a.txt")
http("unrevert_again", "POST", "/session/{ES}/unrevert", watch=watch_rev, session="{ES}", compare="session")
http("revert_assistant", "POST", "/session/{ES}/revert", {"messageID": "{EA1}"}, watch=watch_rev, session="{ES}",
     compare="session", file="a.txt")
http("unrevert_assistant", "POST", "/session/{ES}/unrevert", watch=watch_rev, session="{ES}", compare="session")
http("revert_tool_part", "POST", "/session/{ES}/revert", {"messageID": "{EA1}", "partID": "{EA1TOOL}"}, watch=watch_rev,
     session="{ES}", compare="session", file="a.txt")
http("unrevert_tool_part", "POST", "/session/{ES}/unrevert", watch=watch_rev, session="{ES}", compare="session")
http("revert_after_tool", "POST", "/session/{ES}/revert", {"messageID": "{EA1}", "partID": "{EA1FIN}"}, watch=watch_rev,
     session="{ES}", compare="session", file="a.txt")
http("unrevert_after_tool", "POST", "/session/{ES}/unrevert", watch=watch_rev, session="{ES}", compare="session",
     file="a.txt")
http("revert_unknown_message", "POST", "/session/{ES}/revert", {"messageID": "msg_" + Z}, watch=watch_rev,
     session="{ES}", compare="ours")
http("revert_no_body", "POST", "/session/{ES}/revert", {}, compare="error")
http("revert_unknown_session", "POST", "/session/ses_nope/revert", {"messageID": "{EU1}"})
http("edit_prompt3", "POST", "/session/{ES}/prompt_async", prompt(edit("bye", "nope")))
wait("edit_asked3", "permission.asked", "{ES}", bind={"PER3": "properties.id"})
http("v1_reject_feedback", "POST", "/permission/{PER3}/reply", {"reply": "reject", "message": "not now"}, watch=watch_perm,
     session="{ES}")
idle("edit_idle3", "{ES}")
http("edit_prompt4", "POST", "/session/{ES}/prompt_async", prompt(edit("bye", "nope")))
wait("edit_asked4", "permission.asked", "{ES}", bind={"PER4": "properties.id"})
http("v1_reject", "POST", "/permission/{PER4}/reply", {"reply": "reject"}, watch=watch_perm, session="{ES}")
idle("edit_idle4", "{ES}")
http("reject_messages", "GET", "/session/{ES}/message", compare="messages", file="a.txt")

# 4. A v2 session: the tool's ask and the client's own asks, over the v2 routes.
Q = "?directory={DIR}"
http("v2_session", "POST", "/api/session" + Q, {}, bind={"DS": "data.id"}, compare="none")
http("v2_prompt", "POST", "/api/session/{DS}/prompt" + Q, {"prompt": {"text": edit("bye", "hello", "path")}}, compare="none")
wait("v2_asked", "permission.v2.asked", "{DS}", bind={"PERV": "properties.id"})
http("v2_list", "GET", "/api/session/{DS}/permission", compare="asks")
http("v2_location_list", "GET", "/api/permission/request" + Q, compare="asks")
http("v2_get", "GET", "/api/session/{DS}/permission/{PERV}", compare="asks")
http("v2_get_unknown", "GET", "/api/session/{DS}/permission/per_" + Z)
http("v2_get_bad_id", "GET", "/api/session/{DS}/permission/xyz", compare="error")
http("v2_list_unknown_session", "GET", "/api/session/ses_nope/permission")
http("v2_get_unknown_session", "GET", "/api/session/ses_nope/permission/{PERV}")
http("v1_list_of_v2_ask", "GET", "/permission", compare="ours")
http("v2_reply_bad", "POST", "/api/session/{DS}/permission/{PERV}/reply", {"reply": "maybe"}, compare="error")
http("v2_reply_no_body", "POST", "/api/session/{DS}/permission/{PERV}/reply", compare="error")
http("v2_reply_unknown", "POST", "/api/session/{DS}/permission/per_" + Z + "/reply", {"reply": "once"})
http("v2_reply_once", "POST", "/api/session/{DS}/permission/{PERV}/reply", {"reply": "once"}, watch=watch_perm,
     session="{DS}")
http("v2_reply_again", "POST", "/api/session/{DS}/permission/{PERV}/reply", {"reply": "once"})
idle("v2_idle", "{DS}")
watch_v2ask = ("permission.v2.asked", "permission.asked")
http("v2_ask", "POST", "/api/session/{DS}/permission", {"action": "edit", "resources": ["x.txt"]}, watch=watch_v2ask,
     session="{DS}", bind={"PERA": "data.id"}, compare="asks", file="a.txt")
http("v2_ask_allowed", "POST", "/api/session/{DS}/permission", {"action": "read", "resources": ["x.txt"]},
     watch=watch_v2ask, session="{DS}", compare="asks")
http("v2_ask_no_action", "POST", "/api/session/{DS}/permission", {"resources": ["x.txt"]}, compare="error")
http("v2_list_own_ask", "GET", "/api/session/{DS}/permission", compare="asks")
http("v1_list_of_own_ask", "GET", "/permission", compare="ours")
http("v2_reply_reject", "POST", "/api/session/{DS}/permission/{PERA}/reply", {"reply": "reject", "message": "no"},
     watch=watch_perm, session="{DS}")
http("v2_list_after", "GET", "/api/session/{DS}/permission", compare="asks")

json.dump({"dir": DIR, "steps": STEPS}, open(out, "w"), indent=1)
print(f"{len(STEPS)} steps", file=sys.stderr)
