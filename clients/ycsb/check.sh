#!/bin/sh
# Runs YCSB workloads A and B (the standard YCSB client, this binding) briefly against a fresh
# `phasedb serve` and checks the operation counts and that no operation failed.
#   clients/ycsb/check.sh [RECORDS] [OPERATIONS] [THREADS]     (from the repository's root)
# Needs java 17 and mvn; PHASEDB_BIN names the server binary (default target/release/phasedb).
set -eu
records=${1:-10000}
ops=${2:-100000}
threads=${3:-16}
here=$(cd "$(dirname "$0")" && pwd)
bin=${PHASEDB_BIN:-$here/../../target/release/phasedb}
port=${PHASEDB_PORT:-7690}
mvn -q -B -f "$here/pom.xml" package dependency:build-classpath -Dmdep.outputFile="$here/target/cp.txt" >/dev/null
cp="$here/target/phasedb-ycsb-binding-0.1.0.jar:$(cat "$here/target/cp.txt")"
status=0
for w in a b; do
  "$bin" serve --listen 127.0.0.1:$port 2>/dev/null &
  server=$!
  sleep 0.5
  common="-db site.ycsb.db.phasedb.PhasedbClient -P $here/workloads/workload$w -p phasedb.port=$port -p recordcount=$records -p operationcount=$ops -threads $threads"
  java -cp "$cp" site.ycsb.Client -load $common > "$here/target/load$w.txt" 2>/dev/null
  java -cp "$cp" site.ycsb.Client -t $common > "$here/target/run$w.txt" 2>/dev/null
  kill -TERM $server
  wait $server
  loaded=$(grep '^\[INSERT\], Return=OK' "$here/target/load$w.txt" | awk -F', ' '{print $3}')
  done_ops=$(grep -E '^\[(READ|UPDATE)\], Return=OK' "$here/target/run$w.txt" | awk -F', ' '{s+=$3} END {print s}')
  failed=$(grep -cE 'Return=(ERROR|NOT_FOUND)|FAILED' "$here/target/run$w.txt" || true)
  tput=$(grep '^\[OVERALL\], Throughput' "$here/target/run$w.txt" | awk -F', ' '{print $3}')
  echo "workload $w: loaded $loaded, ran $done_ops of $ops operations OK, $failed failed kinds, $tput ops/s ($threads threads)"
  if [ "$loaded" != "$records" ] || [ "$done_ops" != "$ops" ] || [ "$failed" != 0 ]; then status=1; fi
done
exit $status
