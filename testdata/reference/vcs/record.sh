#!/usr/bin/env bash
# Records the real server's answers for the project, vcs and worktree
# routes. usage: record.sh WORKDIR PORT OUTDIR
# WORKDIR is the one start-opencode-serve.sh was given, after setup.sh
# built its projects (before the server started: its cwd is the project).
set -uo pipefail
W=${1:?workdir}; PORT=${2:?port}; OUT=${3:?outdir}
U=http://127.0.0.1:$PORT
mkdir -p "$OUT"; : > "$OUT/routes.log"
enc() { python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$1"; }
P=$(enc "$W/project"); N=$(enc "$W/plain"); N2=$(enc "$W/plain2")
# rec NAME METHOD PATH [BODY]
rec() {
  local name=$1 method=$2 path=$3 body=${4-}
  local args=(-s -D "$OUT/$name.http.txt" -o "$OUT/$name.raw" -X "$method")
  [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
  curl "${args[@]}" "$U$path"
  local st; st=$(head -1 "$OUT/$name.http.txt" | awk '{print $2}')
  if jq . "$OUT/$name.raw" > "$OUT/$name.json" 2>/dev/null && [ -s "$OUT/$name.raw" ]; then rm "$OUT/$name.raw"
  else rm -f "$OUT/$name.json"; mv "$OUT/$name.raw" "$OUT/$name.txt"; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%T.%3N)" "$method" "$path" "$body" "$st" "$name" >> "$OUT/routes.log"
}
curl -sN "$U/global/event" > "$OUT/global_event.sse" & SSE=$!
sleep 0.5

# Outside git.
rec plain_project_current GET "/project/current?directory=$N"
rec plain_vcs GET "/vcs?directory=$N"
rec plain_vcs_status GET "/vcs/status?directory=$N"
rec plain_vcs_diff_git GET "/vcs/diff?mode=git&directory=$N"
rec plain_vcs_diff_branch GET "/vcs/diff?mode=branch&directory=$N"
rec plain_vcs_diff_raw GET "/vcs/diff/raw?directory=$N"
rec plain_vcs_apply POST "/vcs/apply?directory=$N" '{"patch":"x"}'
rec plain_worktree_list GET "/experimental/worktree?directory=$N"
rec plain_worktree_create POST "/experimental/worktree?directory=$N" '{}'
rec plain_worktree_remove DELETE "/experimental/worktree?directory=$N" "{\"directory\":\"$W/nowhere\"}"
rec plain_worktree_reset POST "/experimental/worktree/reset?directory=$N" "{\"directory\":\"$W/nowhere\"}"

# The git project, edited.
rec git_project_current GET "/project/current?directory=$P"
rec git_vcs GET "/vcs?directory=$P"
rec git_vcs_status GET "/vcs/status?directory=$P"
rec git_vcs_status_src GET "/vcs/status?directory=$P%2Fsrc"
rec git_vcs_diff_git GET "/vcs/diff?mode=git&directory=$P"
rec git_vcs_diff_git_context1 GET "/vcs/diff?mode=git&context=1&directory=$P"
rec git_vcs_diff_git_context0 GET "/vcs/diff?mode=git&context=0&directory=$P"
rec git_vcs_diff_branch GET "/vcs/diff?mode=branch&directory=$P"
rec git_vcs_diff_raw GET "/vcs/diff/raw?directory=$P"
rec git_vcs_diff_raw_src GET "/vcs/diff/raw?directory=$P%2Fsrc"
rec bad_vcs_diff_nomode GET "/vcs/diff?directory=$P"
rec bad_vcs_diff_mode GET "/vcs/diff?mode=bogus&directory=$P"
rec bad_vcs_diff_context GET "/vcs/diff?mode=git&context=-1&directory=$P"
rec bad_vcs_diff_context_abc GET "/vcs/diff?mode=git&context=abc&directory=$P"
rec bad_vcs_apply_nopatch POST "/vcs/apply?directory=$P" '{}'
rec bad_vcs_apply_number POST "/vcs/apply?directory=$P" '{"patch":5}'
rec bad_vcs_apply_json POST "/vcs/apply?directory=$P" '{"patch":'
rec git_vcs_apply_garbage POST "/vcs/apply?directory=$P" '{"patch":"not a patch"}'
rec git_vcs_apply_conflict POST "/vcs/apply?directory=$P" '{"patch":"diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # Demo\n-nothing like this\n+x\n"}'
rec git_vcs_apply_ok POST "/vcs/apply?directory=$P" '{"patch":"diff --git a/applied.txt b/applied.txt\nnew file mode 100644\n--- /dev/null\n+++ b/applied.txt\n@@ -0,0 +1 @@\n+applied\n"}'
rec git_vcs_status_after_apply GET "/vcs/status?directory=$P"
rec git_vcs_apply_empty POST "/vcs/apply?directory=$P" '{"patch":""}'

# Projects.
rec project_list GET "/project"
ID=$(jq -r .id "$OUT/git_project_current.json")
rec project_patch PATCH "/project/$ID?directory=$P" '{"name":"Demo","icon":{"color":"blue","url":"data:image/png;base64,AA=="},"commands":{"start":"true"}}'
rec project_patch_empty PATCH "/project/$ID?directory=$P" '{}'
rec project_patch_override PATCH "/project/$ID?directory=$P" '{"icon":{"override":"data:x"}}'
rec project_list_after_patch GET "/project"
rec project_patch_unknown PATCH "/project/nosuch?directory=$P" '{"name":"x"}'
rec bad_project_patch_name PATCH "/project/$ID?directory=$P" '{"name":5}'
rec bad_project_patch_icon PATCH "/project/$ID?directory=$P" '{"icon":"blue"}'
rec bad_project_patch_json PATCH "/project/$ID?directory=$P" '{'
rec project_directories GET "/project/$ID/directories"
rec project_directories_global GET "/project/global/directories"
rec project_directories_unknown GET "/project/nosuch/directories"

# Worktrees of the git project.
rec worktree_list_empty GET "/experimental/worktree?directory=$P"
rec worktree_create_named POST "/experimental/worktree?directory=$P" '{"name":"My Feature!"}'
rec worktree_create_named_again POST "/experimental/worktree?directory=$P" '{"name":"My Feature!"}'
rec worktree_create_random POST "/experimental/worktree?directory=$P" ''
rec worktree_create_start POST "/experimental/worktree?directory=$P" '{"name":"started","startCommand":"echo started > started.txt"}'
rec bad_worktree_create_name POST "/experimental/worktree?directory=$P" '{"name":5}'
sleep 3
WT=$(jq -r .directory "$OUT/worktree_create_named.json")
WT2=$(jq -r .directory "$OUT/worktree_create_start.json")
ls -la "$WT" "$WT2" > "$OUT/worktree_dirs.txt" 2>&1
git -C "$W/project" worktree list --porcelain > "$OUT/worktree_git_list.txt" 2>&1
git -C "$W/project" branch -a >> "$OUT/worktree_git_list.txt" 2>&1
rec worktree_list GET "/experimental/worktree?directory=$P"
rec worktree_project_current GET "/project/current?directory=$(enc "$WT")"
rec worktree_vcs GET "/vcs?directory=$(enc "$WT")"
rec worktree_vcs_status GET "/vcs/status?directory=$(enc "$WT")"
rec worktree_project_list GET "/project"
rec worktree_project_directories GET "/project/$ID/directories"
printf 'dirty\n' > "$WT/dirty.txt"; printf 'changed\n' > "$WT/README.md"
rec worktree_reset POST "/experimental/worktree/reset?directory=$P" "{\"directory\":\"$WT\"}"
ls -la "$WT" > "$OUT/worktree_after_reset.txt" 2>&1; git -C "$WT" status --porcelain >> "$OUT/worktree_after_reset.txt" 2>&1
rec worktree_reset_primary POST "/experimental/worktree/reset?directory=$P" "{\"directory\":\"$W/project\"}"
rec worktree_reset_unknown POST "/experimental/worktree/reset?directory=$P" "{\"directory\":\"$W/nowhere\"}"
rec bad_worktree_reset_nodir POST "/experimental/worktree/reset?directory=$P" '{}'
rec worktree_remove DELETE "/experimental/worktree?directory=$P" "{\"directory\":\"$WT\"}"
ls -la "$WT" > "$OUT/worktree_after_remove.txt" 2>&1; git -C "$W/project" worktree list --porcelain >> "$OUT/worktree_after_remove.txt" 2>&1; git -C "$W/project" branch -a >> "$OUT/worktree_after_remove.txt" 2>&1
rec worktree_remove_unknown DELETE "/experimental/worktree?directory=$P" "{\"directory\":\"$W/nowhere\"}"
rec worktree_remove_primary DELETE "/experimental/worktree?directory=$P" "{\"directory\":\"$W/project\"}"
rec bad_worktree_remove_nodir DELETE "/experimental/worktree?directory=$P" '{}'
rec bad_worktree_remove_nobody DELETE "/experimental/worktree?directory=$P" ''
rec worktree_list_after_remove GET "/experimental/worktree?directory=$P"
rec worktree_project_list_after_remove GET "/project"

# git init outside git.
rec git_init POST "/project/git/init?directory=$N2"
rec git_init_again POST "/project/git/init?directory=$N2"
rec git_init_in_git POST "/project/git/init?directory=$P"
rec git_init_project_list GET "/project"
rec git_init_vcs_status GET "/vcs/status?directory=$N2"
# A repository without a commit: a staged file and an untracked one.
printf 'one\n' > "$W/plain2/staged.txt"; git -C "$W/plain2" add staged.txt
printf 'two\nlines\n' > "$W/plain2/untracked.txt"
rec nohead_vcs GET "/vcs?directory=$N2"
rec nohead_vcs_status GET "/vcs/status?directory=$N2"
rec nohead_vcs_diff_git GET "/vcs/diff?mode=git&directory=$N2"
rec nohead_vcs_diff_raw GET "/vcs/diff/raw?directory=$N2"
rec nohead_worktree_create POST "/experimental/worktree?directory=$N2" '{"name":"x"}'

# Branch mode: a branch with a commit of its own.
git -C "$W/project" stash -q -u
git -C "$W/project" checkout -q -b feature
printf 'feature\n' > "$W/project/feature.txt"
git -C "$W/project" add feature.txt
GIT_AUTHOR_NAME=ref GIT_AUTHOR_EMAIL=ref@example.com GIT_COMMITTER_NAME=ref GIT_COMMITTER_EMAIL=ref@example.com \
  GIT_AUTHOR_DATE=2026-01-02T00:00:00Z GIT_COMMITTER_DATE=2026-01-02T00:00:00Z git -C "$W/project" commit -q -m feature
printf 'work\n' > "$W/project/work.txt"
# /vcs keeps the branch it read when the directory's instance started:
# start it again.
rec branch_dispose POST "/instance/dispose?directory=$P"
rec branch_vcs GET "/vcs?directory=$P"
rec branch_vcs_diff_branch GET "/vcs/diff?mode=branch&directory=$P"
rec branch_vcs_diff_git GET "/vcs/diff?mode=git&directory=$P"
rec branch_vcs_status GET "/vcs/status?directory=$P"

sleep 1; kill $SSE
