# h18a (issue 24): the set-up workspace's coarse capacities sized afresh as a first growth's
# (VOXFX_SPARSE_SETUP_FIRST_CAPS=grown, the default) against the way before ("fresh"). GPU tests
# with the default (three groups side by side: the workspace and release files, the memory check,
# the ahead / solve-ahead files) beside the spreading 1M liquid's probe frame by frame each way
# (bench/_memory_check_probe.py: in-use peak, estimate, need, capacities); then the 8M Fast frames
# with --stages, fresh / grown in separate processes alternating, two each (per frame
# frame_sums' step + level set = user ms with the pressure stage's host/device ms, the solvers
# built and workspace generations a frame, the pool's GiB after each frame), after the 8M row
# once a way. Logs tarred into $OUT/logs.tgz; summaries on stdout. ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h18a; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout -s INT 62 $PY $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_solver_release_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 62 $PY $T/test_liquid_memory_check_gpu.py > $L/g2.log 2>&1 & P2=$!
timeout -s INT 62 $PY $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_flip_sparse_pressure_ahead_gpu.py \
    > $L/g3.log 2>&1 & P3=$!
for way in fresh grown; do
  VOXFX_SPARSE_SETUP_FIRST_CAPS=$way timeout 62 python3 bench/_memory_check_probe.py > $L/probe_$way.log 2>&1 &
done
wait $P1; echo "workspace + release files rc=$?"; pytest_lines $L/g1.log 8
wait $P2; echo "memory check rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "solve ahead + ahead rc=$?"; pytest_lines $L/g3.log 8
wait
for way in fresh grown; do
  echo "probe $way (frame: in-use peak / need / estimate MiB, ws gen, level-1 cap):"
  awk '/^frame/{printf "%s:%s/%s/%s g%s c%s  ", $2, $6, $10, $8, $17, $20}' $L/probe_$way.log | sed 's/,//g'; echo
done
echo "elapsed $SECONDS"
for way in fresh grown; do
  if [ $SECONDS -lt 100 ]; then
    VOXFX_SPARSE_SETUP_FIRST_CAPS=$way timeout 25 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row_$way.log 2>&1
    echo "row $way rc=$? (elapsed $SECONDS)"
    grep -E "^sparse \|" $L/row_$way.log | awk -F'|' '{print "  pressure",$8,"CG",$11,"substep",$12,"pool peak MiB",$15,"estimate",$17}'
  fi
done
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
builds() {  # per frame: solvers built / workspace generations (where any), then the pool GiB after each frame
  awk '/^[0-9]+ \|/{if (f!="" && (b||g)) printf "f%s:%d/%d ", f, b, g; f=$1; b=0; g=0; p=p" "$NF}
       /solver event: built/{b++} /solver event: workspace generation/{g++}
       END{if (b||g) printf "f%s:%d/%d ", f, b, g; print ""}' "$1"
  awk -F'|' '/^[0-9]+ \|/{gsub(/ /,"",$9); printf "%s ", $9} END{print ""}' "$1"
}
for i in 1 2; do
  for way in fresh grown; do
    if [ $SECONDS -lt 170 ]; then
      VOXFX_SPARSE_SETUP_FIRST_CAPS=$way timeout 30 python3 bench/flip_sparse.py $FR > $L/$way$i.log 2>&1
      echo "$way #$i rc=$? (elapsed $SECONDS)"
      frame_sums $L/$way$i.log pressure
      echo -n "   builds/generations: "; builds $L/$way$i.log
      grep -E "solver event: (built|workspace)" $L/$way$i.log | cut -c1-170 | sed 's/^ */   /'
    fi
  done
done
tar czf $OUT/logs.tgz -C /tmp h18a 2>/dev/null
echo "elapsed $SECONDS"
