#!/usr/bin/env bash
# The pull-request check for open splits: every submission folder a PR adds or changes under
# submissions/ is validated and scored on the public dataset revision, then the leaderboard is
# rebuilt with it. Fails with the validator's one-line error. Run by
# .github/workflows/submission.yml, and by tests/service/test_pr_flow.py on a scratch repository.
#
#   scripts/check_submission_pr.sh BASE_REF DATA [OUT]
#
# BASE_REF: the branch the PR targets (origin/main); DATA: the public dataset (a folder or
# hf://ORG/NAME@REV); OUT: where the rebuilt leaderboard goes (default: leaderboard-pr/).
set -euo pipefail
base="${1:?usage: check_submission_pr.sh BASE_REF DATA [OUT]}"
data="${2:?usage: check_submission_pr.sh BASE_REF DATA [OUT]}"
out="${3:-leaderboard-pr}"
fail() {
    # GitHub shows ::error lines as annotations; the same line is the failure message.
    echo "::error::$1"
    echo "check_submission_pr: $1" >&2
    exit 1
}
changed=$(git diff --name-only --diff-filter=ACMR "$base"...HEAD -- submissions/)
outside=$(git diff --name-only "$base"...HEAD | grep -v '^submissions/' || true)
[ -z "$changed" ] && { echo "no submission folder added or changed; nothing to check"; exit 0; }
[ -n "$outside" ] && fail "a submission PR changes only submissions/NAME/; it also changes: $(echo $outside | tr '\n' ' ')"
names=$(echo "$changed" | awk -F/ 'NF >= 3 {print $2}' | sort -u)
[ -z "$names" ] && fail "files directly under submissions/ ($(echo $changed | tr '\n' ' ')); put them in submissions/NAME/"
for name in $names; do
    folder="submissions/$name"
    [ -d "$folder" ] || fail "$folder: removed or renamed; a PR adds or updates a submission"
    if ! report=$(searchtome --no-progress validate "$folder" --data "$data" --max-problems 1 2>&1); then
        first=$(echo "$report" | grep -v '^ ' | grep -v '^warning' | grep -m1 ': ' || true)
        fail "$folder: rejected: ${first:-$report}"
    fi
    echo "$report" | head -3
    if ! scores=$(searchtome --no-progress score "$folder" --data "$data" 2>&1); then
        fail "$folder: could not be scored: $(echo "$scores" | tail -1)"
    fi
    echo "$scores"
done
if ! built=$(searchtome --no-progress leaderboard --data "$data" --submissions submissions --out "$out" --no-pair 2>&1); then
    fail "leaderboard rebuild failed: $(echo "$built" | tail -1)"
fi
echo "$built" | tail -3
echo "ok: $(echo $names | tr '\n' ' ')validated, scored and ranked; leaderboard in $out/"
