#!/bin/sh
# tools/per_release.sh JOBS LOGS TARGET [MAKEVAR=VALUE ...] -- RELEASE ...
#
# `make TARGET-<release>` for each release, JOBS at a time, output to
# LOGS/<release>.log. A .venvs/torch-<release> that did not exist before is
# removed after its release, so that the disk holds JOBS CUDA venvs at a
# time. Fails, once all are done, if one failed.
set -u
jobs=$1 logs=$2 target=$3
shift 3
vars=
while [ "$1" != "--" ]; do vars="$vars $1"; shift; done
shift
mkdir -p "$logs"
# The linters' venv, which every release's target needs: built once here,
# not by JOBS makes at the same time.
make --no-print-directory .venvs/lint/.installed >/dev/null || exit 1
printf '%s\n' "$@" | xargs -P "$jobs" -I{} sh -c '
  v={}; kept=$(test -d .venvs/torch-$v && echo yes)
  if make --no-print-directory '"$target"'-$v '"$vars"' > '"$logs"'/$v.log 2>&1
  then ok=1; else ok=; fi
  test -n "$kept" || rm -rf .venvs/torch-$v
  if test -n "$ok"; then echo "torch $v: '"$target"' passed"
  else echo "torch $v: '"$target"' FAILED, see '"$logs"'/$v.log"; exit 1; fi'
