#!/usr/bin/env bash
# Builds the projects the vcs/project/worktree references were recorded on
# (and that routes/vcs_reference_test.go builds again, file for file):
#   $1/project  a git repo (branch main, one commit "init") with an edit
#   $1/plain    a directory outside git
#   $1/plain2   another one, for POST /project/git/init
# usage: setup.sh WORKDIR
set -euo pipefail
W=${1:?workdir}
export GIT_AUTHOR_NAME=ref GIT_AUTHOR_EMAIL=ref@example.com GIT_COMMITTER_NAME=ref GIT_COMMITTER_EMAIL=ref@example.com
export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
P=$W/project
rm -rf "$P" "$W/plain" "$W/plain2"
mkdir -p "$P/src" "$W/plain" "$W/plain2"
git -C "$P" init -q -b main
printf '# Demo\nhello world\n' > "$P/README.md"
printf 'package main\n\nfunc main() {\n\tprintln("hi")\n}\n' > "$P/src/main.go"
printf 'old\n' > "$P/old.txt"
printf 'ignored/\n' > "$P/.gitignore"
git -C "$P" add -A
git -C "$P" commit -q -m init
# The edit: a changed line and an added one, a deleted file, a staged new
# file, untracked files (text, binary, a name with a space and non-ASCII
# letters), an ignored file.
printf '# Demo\nhello there\nmore\n' > "$P/README.md"
rm "$P/old.txt"
printf 'staged\n' > "$P/staged.txt"
git -C "$P" add staged.txt
printf 'new file\nline2\n' > "$P/new.txt"
printf 'a\0b' > "$P/bin.dat"
printf 'x\n' > "$P/with space.txt"
printf 'ü\n' > "$P/src/ünï.txt"
mkdir -p "$P/ignored"
printf 'secret\n' > "$P/ignored/secret.txt"
printf 'plain\n' > "$W/plain/a.txt"
