#!/usr/bin/env bash
# How ncu's --filter-mode per-launch-config counts the decode loop's launches (issue 49), LaunchStats only.
set -u
cd ${SRC:-.}
W=/tmp/nf; rm -rf $W; mkdir -p $W
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="python3 benchmarks/decode_loop.py --new-tokens ${TOKENS:-8}"
FULL=$(python3 -c "import json; print(json.load(open('sessions/decode-eager-guided/manifest.json'))['captures'][0]['guided']['runs'][0]['regex'])")
TNT='regex:^(nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_TNT)$'
COMMON="--section LaunchStats --clock-control none --cache-control none --kernel-name-base demangled"
SECONDS=0
nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite true -o $W/seq $P > $W/nsys.log 2>&1
nsys export --type sqlite --force-overwrite true -o $W/seq.sqlite $W/seq.nsys-rep >> $W/nsys.log 2>&1
echo "nsys rc=$? ${SECONDS}s"
run() { local name=$1; shift; SECONDS=0; ncu $COMMON "$@" --force-overwrite --export $W/$name $P > $W/$name.log 2>&1; echo "$name rc=$? ${SECONDS}s $(grep -c '==PROF== Profiling' $W/$name.log) profiled"; }
run all --filter-mode global
run e1_full_skip4 --kernel-name "$FULL" --filter-mode per-launch-config --launch-skip 4 --launch-count 1
run e2_tnt_skip4 --kernel-name "$TNT" --filter-mode per-launch-config --launch-skip 4 --launch-count 1
run e3_full_skip4_count3 --kernel-name "$FULL" --filter-mode per-launch-config --launch-skip 4 --launch-count 3
run e5_full_global --kernel-name "$FULL" --filter-mode global
run e6_full_skip0 --kernel-name "$FULL" --filter-mode per-launch-config --launch-skip 0 --launch-count 1
for f in $W/*.log; do grep -h "==PROF== Profiling" $f | head -3; done
xz -T4 -k $W/seq.sqlite
tar -C $W -cf $OUT/ncu_filter.tar $(cd $W && ls *.ncu-rep *.log seq.sqlite.xz)
ls -la $OUT
date -u
