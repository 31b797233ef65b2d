#!/usr/bin/env bash
# Which part of the guided regex loses launches (issue 49): LaunchStats only, per-launch-config, skip 4, count 1.
set -u
cd ${SRC:-.}
W=/tmp/nr; rm -rf $W; mkdir -p $W
P="python3 benchmarks/decode_loop.py --new-tokens 8"
FULL=$(python3 -c "import json; print(json.load(open('sessions/decode-eager-guided/manifest.json'))['captures'][0]['guided']['runs'][0]['regex'])")
echo "full regex length ${#FULL}"
NAMES='cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x64_4x1x1_cga1x1x1_kernel0_0|nvjet_sm90_hsh_256x8_64x6_2x1_v_bz_TNT|nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_TNT|nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_splitK_TNT'
LN='void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::Half, float, \(bool\)0>\(int, T2, const T1 \*, const T1 \*, const T1 \*, T2 \*, T2 \*, T1 \*\)'
COMMON="--section LaunchStats --clock-control none --cache-control none --kernel-name-base demangled --filter-mode per-launch-config --launch-skip 4 --launch-count 1"
run() { local name=$1; shift; ncu $COMMON --kernel-name "$1" --force-overwrite --export $W/$name $P > $W/$name.log 2>&1; echo "$name rc=$? regex_len=${#1}"; grep "==PROF== Profiling" $W/$name.log | sed -E 's/.*Profiling "(.{0,60}).*/\1/' | sort | uniq -c; }
run r_short4 "regex:^($NAMES)\$"
run r_tnt_ln "regex:^(nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_TNT|$LN)\$"
run r_full_again "$FULL"
run r_nvjet_prefix "regex:^nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_TNT\$"
python3 .devcache/ncu_dump.py $W $OUT/ncu_regex.csv
tar -C $W -cf $OUT/ncu_regex_logs.tar $(cd $W && ls *.log)
