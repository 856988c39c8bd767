set -e
# Writes a migration fixture (Tests/SheetdIntegrationTests/Sheetd/MigrationTests.swift): the data
# file of seven sessions in every phase, and answers.jsonl, what sheetd answered for each
# (GET /sessions/ID, then GET /sessions/ID/events), into OUT-DIR.
# Usage: make-fixture.sh PATH-TO-SHEETD OUT-DIR
#   PATH-TO-SHEETD: a build of a commit whose schema the fixture keeps (schema-3 was written by
#   4efe570, the last build whose files have no column for Part 2's state).
BIN=${1:?path to sheetd}
OUT=${2:?output directory}
rm -rf /tmp/p2fixture && mkdir -p /tmp/p2fixture
$BIN --port 18931 --data-dir /tmp/p2fixture --log-level off > /tmp/p2fixture.out 2>&1 &
PID=$!
sleep 2
B=http://127.0.0.1:18931
id() { python3 -c 'import json,sys;print(json.load(sys.stdin)["id"])'; }
idA=$(curl -s -XPOST $B/sessions -d '{"detents":["medium","large"],"thresholdDetent":"height:300"}' | id)
curl -s -XPOST $B/sessions/$idA/drag -d '{"to":"medium"}' >/dev/null
curl -s -XPOST $B/sessions/$idA/drag -d '{"to":"height:300"}' >/dev/null
curl -s -XPOST $B/sessions/$idA/confirm -d '{"action":"save"}' >/dev/null
idB=$(curl -s -XPOST $B/sessions -d '{}' | id)
curl -s -XPOST $B/sessions/$idB/drag -d '{"to":"closed"}' >/dev/null
idC=$(curl -s -XPOST $B/sessions -d '{"detents":["fraction:0.25","medium"],"containerHeight":390,"dismissPolicy":"block","decelerationRate":"fast"}' | id)
curl -s -XPOST $B/sessions/$idC/drag -d '{"translation":100,"velocity":300}' >/dev/null
curl -s -XPOST $B/sessions/$idC/drag -d '{"to":"closed"}' >/dev/null
idD=$(curl -s -XPOST $B/sessions -d '{"detents":["medium"],"thresholdDetent":"fraction:0.1","interceptAction":"notify"}' | id)
curl -s -XPOST $B/sessions/$idD/drag -d '{"to":"fraction:0.1"}' >/dev/null
curl -s -XPOST $B/sessions/$idD/dismiss -d '{"reason":"done"}' >/dev/null
curl -s -XPOST $B/sessions/$idD/present -d '' >/dev/null
idE=$(curl -s -XPOST $B/sessions -H 'Idempotency-Key: fixture-create-1' -d '{"detents":["large","medium"],"defaultDetent":"medium"}' | id)
curl -s -XPOST $B/sessions/$idE/dismiss -d '{}' >/dev/null
idF=$(curl -s -XPOST $B/sessions -d '{"detents":["medium","large"],"thresholdDetent":"height:300","dismissPolicy":"block"}' | id)
curl -s -XPOST $B/sessions/$idF/drag -H 'Idempotency-Key: fixture-drag-1' -d '{"to":"medium"}' >/dev/null
idG=$(curl -s -XPOST $B/sessions -d '{"detents":["medium","large"],"thresholdDetent":"height:300"}' | id)
curl -s -XPOST $B/sessions/$idG/drag -d '{"to":"height:300"}' >/dev/null
for i in $idG $idA $idB $idC $idD $idE $idF; do curl -s $B/sessions/$i; echo; curl -s "$B/sessions/$i/events"; echo; done > /tmp/p2fixture-answers.txt
kill -TERM $PID; wait $PID || true
mkdir -p "$OUT"
cp /tmp/p2fixture/sheetd.sqlite3 "$OUT/sheetd.sqlite3"
cp /tmp/p2fixture-answers.txt "$OUT/answers.jsonl"
echo "$idA $idB $idC $idD $idE $idF $idG"
