#!/usr/bin/env bash
# The pull-request check for open splits, run from the PR's checkout:
#
#   scripts/check_submission_pr.sh BASE_REF DATA [OUT]
#
# BASE_REF: the branch the PR targets (origin/main); DATA: the public dataset (a folder or
# hf://ORG/NAME@REV); OUT: where the check's own leaderboard goes (default: leaderboard-pr/).
#
# A submission PR adds new folders submissions/NAME/ and nothing else. Each is validated and
# scored, then ranked with every run of the base branch, by the BASE branch's code: the base is
# unpacked with `git archive BASE_REF`, the PR's submission folders are copied into it, and
# Python runs there with that tree alone on its path, so no file of the PR is ever imported.
# PYTHON (default python3) needs searchtome's dependencies; .github/workflows/submission.yml
# installs the base tree into it. Every refusal is one line naming the file and what to do (also
# a GitHub annotation). tests/service/test_pr_flow.py walks this road in a scratch repository.
set -euo pipefail
usage="usage: check_submission_pr.sh BASE_REF DATA [OUT]"
base="${1:?$usage}"
data="${2:?$usage}"
out="${3:-leaderboard-pr}"
python="${PYTHON:-python3}"
fail() {
    echo "::error::$1"
    echo "check_submission_pr: $1" >&2
    exit 1
}
git rev-parse --verify -q "$base^{commit}" >/dev/null || fail "$base: no such commit here; fetch the base branch (git fetch origin) and pass it as BASE_REF"
fork=$(git merge-base "$base" HEAD) || fail "$base: shares no history with HEAD; open the PR against the repository's branch"
on_base() { git cat-file -e "$base:$1" 2>/dev/null || git cat-file -e "$fork:$1" 2>/dev/null; }

# What the PR changes: new folders under submissions/, nothing else.
names=()
while IFS=$'\t' read -r _ path; do
    [ -n "$path" ] || continue
    case "$path" in
    submissions/*/*) ;;
    *) fail "$path: a submission PR changes only files in a new folder submissions/NAME/; move this change to a pull request of its own" ;;
    esac
    name=${path#submissions/}
    name=${name%%/*}
    on_base "submissions/$name" && fail "$path: submissions/$name is already on $base; a submission PR adds a new folder (a new version of a run gets a new name)"
    case "$name" in
    .* | _* | *[!A-Za-z0-9._-]*) fail "$path: '$name' is not a usable folder name; name the folder with letters, digits, '.', '_' and '-' (not first)" ;;
    esac
    mode=$(git ls-tree HEAD -- "$path" | cut -d' ' -f1)
    [ "$mode" = 100644 ] || [ "$mode" = 100755 ] || fail "$path: a symbolic link or submodule (mode $mode); commit the file itself"
    [[ " ${names[*]-} " == *" $name "* ]] || names+=("$name")
done < <(git diff --name-status --no-renames "$fork" HEAD)
[ "${#names[@]}" -gt 0 ] || { echo "no submission folder added; nothing to check"; exit 0; }

# The base branch's tree, with the PR's folders (as committed) copied in.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/base"
git archive "$base" | tar -x -C "$work/base"
git archive HEAD -- "${names[@]/#/submissions/}" | tar -x -C "$work/base"
case "$data" in hf://*) ;; *) [ -e "$data" ] && data=$(cd "$data" && pwd) ;; esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$work/base"
searchtome() { PYTHONPATH="$work/base" PYTHONSAFEPATH=1 "$python" -m searchtome "$@"; }
where=$(PYTHONPATH="$work/base" "$python" -c 'import searchtome; print(searchtome.__file__)') ||
    fail "$python: cannot import searchtome's dependencies; install the base branch (pip install BASE_TREE) or set PYTHON"
[ "$where" = "$work/base/searchtome/__init__.py" ] || fail "$where: searchtome is not the base branch's here; unset what puts another copy first on the path"

for name in "${names[@]}"; do
    folder="submissions/$name"
    if ! report=$(searchtome --no-progress validate "$folder" --data "$data" --max-problems 1 2>&1); then
        first=$(echo "$report" | grep -v '^ ' | grep -v '^warning' | grep -m1 ': ' || true)
        fail "${first:-$folder: $(echo "$report" | tail -1)}; fix it and rerun \`searchtome validate $folder --data DATA\` until it passes"
    fi
    echo "$report" | head -3
    scores=$(searchtome --no-progress score "$folder" --data "$data" 2>&1) ||
        fail "$folder: could not be scored: $(echo "$scores" | tail -1); run \`searchtome score $folder --data DATA\` to see why"
    echo "$scores"
done
built=$(searchtome --no-progress leaderboard --data "$data" --submissions submissions --out "$out" --no-pair 2>&1) ||
    fail "submissions/${names[0]}: the leaderboard with it could not be built: $(echo "$built" | tail -1); run \`searchtome leaderboard --data DATA --submissions submissions/ --out /tmp/board\` to see why"
echo "$built" | tail -3
echo "ok: ${names[*]} validated, scored and ranked by $base's code; leaderboard in $out/"
