#!/bin/sh
# Runs the standard YCSB client's core workloads A to F (this binding) briefly, each against a
# fresh `phasedb serve`, and checks the operation counts and that no operation failed.
#   clients/ycsb/check.sh [RECORDS] [OPERATIONS] [THREADS] [WORKLOADS]   (from the repository's root)
# WORKLOADS is a space-separated list, "a b c d e f" by default.
# Needs java 17 and mvn; PHASEDB_BIN names the server binary (default target/release/phasedb).
set -eu
records=${1:-10000}
ops=${2:-100000}
threads=${3:-16}
workloads=${4:-a b c d e f}
here=$(cd "$(dirname "$0")" && pwd)
bin=${PHASEDB_BIN:-$here/../../target/release/phasedb}
port=${PHASEDB_PORT:-7690}
mvn -q -B -f "$here/pom.xml" package dependency:build-classpath -Dmdep.outputFile="$here/target/cp.txt" >/dev/null
cp="$here/target/phasedb-ycsb-binding-0.1.0.jar:$(cat "$here/target/cp.txt")"
status=0
for w in $workloads; do
  "$bin" serve --listen 127.0.0.1:$port 2>/dev/null &
  server=$!
  sleep 0.5
  common="-db site.ycsb.db.phasedb.PhasedbClient -P $here/workloads/workload$w -p phasedb.port=$port -p recordcount=$records -p operationcount=$ops -threads $threads"
  java -cp "$cp" site.ycsb.Client -load $common > "$here/target/load$w.txt" 2>/dev/null
  java -cp "$cp" site.ycsb.Client -t $common > "$here/target/run$w.txt" 2>/dev/null
  kill -TERM $server
  wait $server
  loaded=$(grep '^\[INSERT\], Return=OK' "$here/target/load$w.txt" | awk -F', ' '{print $3}')
  # A read-modify-write counts as one operation but answers one read and one update.
  answered=$(grep -E '^\[(READ|UPDATE|SCAN|INSERT)\], Return=OK' "$here/target/run$w.txt" | awk -F', ' '{s+=$3} END {print s+0}')
  rmw=$(grep '^\[READ-MODIFY-WRITE\], Operations' "$here/target/run$w.txt" | awk -F', ' '{s+=$3} END {print s+0}')
  done_ops=$((answered - rmw))
  failed=$(grep -cE 'Return=(ERROR|NOT_FOUND)|FAILED' "$here/target/run$w.txt" || true)
  tput=$(grep '^\[OVERALL\], Throughput' "$here/target/run$w.txt" | awk -F', ' '{print $3}')
  echo "workload $w: loaded $loaded, ran $done_ops of $ops operations OK, $failed failed kinds, $tput ops/s ($threads threads)"
  if [ "$loaded" != "$records" ] || [ "$done_ops" != "$ops" ] || [ "$failed" != 0 ]; then status=1; fi
done
exit $status
