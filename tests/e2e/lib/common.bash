# Sourced by the end-to-end scripts (tests/e2e/*.sh): a scratch directory removed on exit, and
# the two checks every script uses. Not a test itself, so it lives outside the registered glob.

# Scratch directory of this run; uppercase alias for the scripts that use it.
work=$(mktemp -d)
WORK=$work
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_status CODE command...: runs the command with its output in $work/out.txt and
# $work/err.txt, and fails (showing the end of err.txt) unless it exits with CODE.
expect_status() {
  local want=$1; shift
  set +e
  "$@" >"$work/out.txt" 2>"$work/err.txt"
  local got=$?
  set -e
  [[ $got == "$want" ]] || { tail -20 "$work/err.txt" >&2; fail "'$*' exited $got, expected $want"; }
}
