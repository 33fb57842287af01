#!/usr/bin/env bash
# usage: cap.sh MODE SCENARIO PROMPT_TEXT [SECOND_TEXT]
#   MODE v1: blocking POST /session/{id}/message ; v2: POST /api/session/{id}/prompt + POST /api/session/{id}/wait
#   SECOND_TEXT (v1 only): sent 0.5 s later with POST /session/{id}/prompt_async
set -u
MODE=$1; S=$2; TEXT=$3; SECOND=${4:-}
B=http://127.0.0.1:14410
O=/work/main/testdata/reference/tools
curl -sN $B/event > $O/$S.event.sse & P1=$!
curl -sN $B/global/event > $O/$S.global.sse & P2=$!
P4=
if [ $MODE = v2 ]; then curl -sN $B/api/event > $O/$S.api-event.sse & P4=$!; fi
sleep 0.5
ID=$(curl -s -X POST -H 'content-type: application/json' -d '{}' $B/session | jq -r .id)
echo "$S session $ID"
curl -sN $B/api/session/$ID/event > $O/$S.session-event.sse & P3=$!
sleep 0.5
# auto-answer permission requests with "once" (logged)
( while sleep 0.3; do
    curl -s $B/permission | jq -c '.[]' 2>/dev/null | while read -r p; do
      rid=$(jq -r .id <<<"$p"); echo "$p" >> $O/$S.permission.jsonl
      curl -s -X POST -H 'content-type: application/json' -d '{"reply":"once"}' $B/permission/$rid/reply >> $O/$S.permission.jsonl; echo >> $O/$S.permission.jsonl
    done
    curl -s $B/api/session/$ID/permission | jq -c '.data[]?' 2>/dev/null | while read -r p; do
      rid=$(jq -r .id <<<"$p"); echo "$p" >> $O/$S.permission.jsonl
      curl -s -X POST -H 'content-type: application/json' -d '{"reply":"once"}' $B/api/session/$ID/permission/$rid/reply >> $O/$S.permission.jsonl; echo >> $O/$S.permission.jsonl
    done
  done ) & PW=$!
if [ $MODE = v1 ]; then
  BODY=$(jq -nc --arg t "$TEXT" '{parts:[{type:"text",text:$t}]}')
  if [ -n "$SECOND" ]; then
    curl -s -X POST -H 'content-type: application/json' -d "$BODY" $B/session/$ID/message > $O/$S.post.raw & PP=$!
    sleep 0.5
    B2=$(jq -nc --arg t "$SECOND" '{parts:[{type:"text",text:$t}]}')
    curl -s -i -X POST -H 'content-type: application/json' -d "$B2" $B/session/$ID/prompt_async > $O/$S.prompt_async.http
    curl -s $B/session/$ID/message | jq . > $O/$S.message-while-busy.json
    curl -s $B/session/status | jq . > $O/$S.status-while-busy.json
    wait $PP; jq . $O/$S.post.raw > $O/$S.post.json; rm $O/$S.post.raw
    # wait for idle
    for _ in $(seq 1 60); do st=$(curl -s $B/session/status | jq -r --arg id $ID '.[$id].type // "idle"'); [ "$st" = idle ] && break; sleep 0.25; done
  else
    curl -s -X POST -H 'content-type: application/json' -d "$BODY" $B/session/$ID/message | jq . > $O/$S.post.json
  fi
else
  BODY=$(jq -nc --arg t "$TEXT" '{prompt:{text:$t}}')
  curl -s -X POST -H 'content-type: application/json' -d "$BODY" $B/api/session/$ID/prompt | jq . > $O/$S.post.json
  if [ -n "$SECOND" ]; then
    sleep 0.5
    B2=$(jq -nc --arg t "$SECOND" --arg d "${DELIVERY:-}" 'if $d=="" then {prompt:{text:$t}} else {prompt:{text:$t},delivery:$d} end')
    curl -s -i -X POST -H 'content-type: application/json' -d "$B2" $B/api/session/$ID/prompt > $O/$S.post2.http
    curl -s $B/session/$ID/message | jq . > $O/$S.message-while-busy.json
    curl -s $B/api/session/$ID/message | jq . > $O/$S.api-message-while-busy.json
  fi
  curl -s -w ' %{http_code}\n' -X POST $B/api/session/$ID/wait > $O/$S.wait.http
  sleep 0.3
  for _ in $(seq 1 120); do curl -s $B/api/session/active | jq -c . >> /tmp/refcap-tools/$S.active.log; curl -s $B/api/session/active | jq -e --arg id $ID '.data[$id]' >/dev/null || break; sleep 0.25; done
fi
sleep 1.5
kill $PW
curl -s $B/session/$ID/message | jq . > $O/$S.message.json
curl -s $B/api/session/$ID/message | jq . > $O/$S.api-message.json
curl -s $B/session/$ID | jq . > $O/$S.session.json
kill $P1 $P2 $P3 $P4
echo $ID > /tmp/refcap-tools/$S.id
