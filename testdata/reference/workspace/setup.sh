#!/usr/bin/env bash
# Builds the directories the workspace references were recorded on (and
# that routes/workspace_reference_test.go builds again, file for file):
#   $1/project  a git repo (branch main, one commit "init": fixed author and
#               date, so its root commit, the project ID, is always the same)
#   $1/other    another git repo (another project)
#   $1/plain    a directory outside git
# usage: setup.sh WORKDIR
set -euo pipefail
W=${1:?workdir}
export GIT_AUTHOR_NAME=ref GIT_AUTHOR_EMAIL=ref@example.com GIT_COMMITTER_NAME=ref GIT_COMMITTER_EMAIL=ref@example.com
export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
P=$W/project
rm -rf "$P" "$W/other" "$W/plain" "$W/copies"
mkdir -p "$P/src" "$W/other" "$W/plain"
git -C "$P" init -q -b main
printf '# Demo\nhello world\n' > "$P/README.md"
printf 'package main\n\nfunc main() {\n\tprintln("hi")\n}\n' > "$P/src/main.go"
git -C "$P" add -A
git -C "$P" commit -q -m init
git -C "$W/other" init -q -b main
printf 'other\n' > "$W/other/other.txt"
git -C "$W/other" add -A
git -C "$W/other" commit -q -m other
printf 'plain\n' > "$W/plain/a.txt"
