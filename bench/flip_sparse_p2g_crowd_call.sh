#!/usr/bin/env bash
# A record of h17d's call: VOXFX_SPARSE_SCATTER_CROWD, its GPU file and the bench's --mins builds were removed after it.
# The device call for the scatter's crowded warps (helper h17d, session 17; VOXFX_SPARSE_SCATTER_CROWD,
# flip_sparse_scatter.cu's SCATTER_CROWD, off by default), ≤ ~200 s: three GPU test groups in parallel with
# the switch on (the new crowd file: the same bits as off on a crowded scene, random particles and dam-break
# runs; the scatter, lean and banks files; the P2G tail, cell-type and binning files), then alone: P2G launch
# by launch at frame 0 and after 12 Fast frames, off / on and the scatter's builds (bench/flip_sparse_p2g_crowd.py),
# then the 8M Fast frames off / on in separate processes, alternating, two each: per frame
# step+level set=user frame ms (p2g host/device ms summed over the frame's substeps), and the p2g device ms
# summed over frames 6–11. Logs in /tmp/h17d, tarred to $OUT/logs.tgz.
OUT_DEFAULT=$OUT
. bench/_device_call.sh
L=/tmp/h17d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
export VOXFX_SPARSE_SCATTER_CROWD=on
timeout -s INT ${TESTS_S:-62} $PY $T/test_flip_sparse_scatter_crowd_gpu.py > $L/t1.log 2>&1 & P1=$!
timeout -s INT ${TESTS_S:-62} $PY $T/test_flip_sparse_scatter_gpu.py $T/test_flip_sparse_scatter_lean_gpu.py \
    $T/test_flip_sparse_scatter_banks_gpu.py > $L/t2.log 2>&1 & P2=$!
timeout -s INT ${TESTS_S:-62} $PY $T/test_flip_sparse_p2g_tail_gpu.py $T/test_flip_sparse_p2g_cells_gpu.py \
    $T/test_flip_sparse_binning_gpu.py > $L/t3.log 2>&1 & P3=$!
wait $P1; echo "crowd file (on) rc=$?"; pytest_lines $L/t1.log 10
wait $P2; echo "scatter, lean, banks files (on) rc=$?"; pytest_lines $L/t2.log 8
wait $P3; echo "p2g tail, cells, binning files (on) rc=$?"; pytest_lines $L/t3.log 8
unset VOXFX_SPARSE_SCATTER_CROWD
echo "elapsed $SECONDS"
timeout ${BENCH_S:-42} python3 bench/flip_sparse_p2g_crowd.py --repeat 5 --mins 2 4 8 > $L/p2g_crowd.log 2>&1
echo "p2g crowd bench rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:|^   frame [0-9]" $L/p2g_crowd.log | cut -c1-900 | tail -16
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
frames() {
    awk -F'|' '/^[0-9]+ \|/{f=$1; gsub(/ /,"",f); s=$3; gsub(/ /,"",s); split($5,a," "); u=$10; gsub(/ /,"",u);
        cur=f":"s"+"a[1]"="u; next}
        /step stages host\/device/ && cur!="" {match($0,/p2g [0-9.]+\/[0-9.]+/); p=substr($0,RSTART+4,RLENGTH-4);
        printf "%s(%s) ", cur, p; split(p,b,"/"); if (f+0>=6 && f+0<=11) {d+=b[2]; us+=u}; cur=""}
        END{printf "\n   frames 6-11: user %.1f ms, p2g device %.2f ms\n", us, d}' "$1"
}
for i in 1 2; do
    for way in off on; do
        [ $SECONDS -gt 172 ] && { echo "skipped $way #$i (elapsed $SECONDS)"; continue; }
        VOXFX_SPARSE_SCATTER_CROWD=$way timeout ${FRAMES_S:-26} python3 bench/flip_sparse.py $FR > $L/$way$i.log 2>&1
        echo "$way #$i rc=$? elapsed $SECONDS"; frames $L/$way$i.log
    done
done
tar czf $OUT/logs.tgz -C /tmp h17d 2>/dev/null
