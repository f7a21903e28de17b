#!/bin/sh
# The standard YCSB client, workload A, against `phasedb serve` and against Debian's redis-server
# (no persistence), same records, operations and client threads; prints both throughputs.
#   clients/ycsb/compare-redis.sh [RECORDS] [OPERATIONS] [THREADS]     (from the repository's root)
# Needs java 17, mvn and redis-server; PHASEDB_BIN names the server binary.
set -eu
records=${1:-10000}
ops=${2:-100000}
threads=${3:-16}
here=$(cd "$(dirname "$0")" && pwd)
bin=${PHASEDB_BIN:-$here/../../target/release/phasedb}
mvn -q -B -f "$here/pom.xml" package dependency:build-classpath -Dmdep.outputFile="$here/target/cp.txt" >/dev/null
mvn -q -B -f "$here/redis/pom.xml" package dependency:build-classpath -Dmdep.outputFile="$here/redis/target/cp.txt" >/dev/null
phasedb_cp="$here/target/phasedb-ycsb-binding-0.1.0.jar:$(cat "$here/target/cp.txt")"
redis_cp="$here/redis/target/redis-ycsb-baseline-0.1.0.jar:$(cat "$here/redis/target/cp.txt"):$(cat "$here/target/cp.txt")"
common="-P $here/workloads/workloada -p recordcount=$records -p operationcount=$ops -threads $threads"

redis-server --port 6390 --save '' --appendonly no >/dev/null &
redis=$!
"$bin" serve --listen 127.0.0.1:7691 2>/dev/null &
phasedb=$!
sleep 0.5
run() { # name classpath db props
  java -cp "$2" site.ycsb.Client -load -db "$3" $common $4 >/dev/null 2>&1
  java -cp "$2" site.ycsb.Client -t -db "$3" $common $4 2>/dev/null > "$here/target/compare-$1.txt"
  echo "$1: $(grep '^\[OVERALL\], Throughput' "$here/target/compare-$1.txt" | awk -F', ' '{printf "%.0f", $3}') ops/s"
}
run redis "$redis_cp" site.ycsb.db.redisbaseline.RedisBaseline "-p redis.port=6390"
run phasedb "$phasedb_cp" site.ycsb.db.phasedb.PhasedbClient "-p phasedb.port=7691"
kill -TERM $phasedb; wait $phasedb
kill -TERM $redis; wait $redis || true
