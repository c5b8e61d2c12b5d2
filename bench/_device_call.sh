# The set-up every device call script (bench/*_call.sh) shares, sourced from the repository
# root on the device as its first line after the notes:
#     . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
# OUT: the logs' folder ($OUT, else the script's OUT_DEFAULT, else out), made here; Python's
# output unbuffered (a timeout still leaves the lines printed); T: the GPU tests' folder; the
# card and its driver printed first (a run's numbers name the device they came from).
OUT=${OUT:-${OUT_DEFAULT:-out}}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T=tests/gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# pytest_lines LOG [E_LINES]: a pytest log's summary line, its FAILED / ERROR lines and, with
# E_LINES, that many of its "E  " lines (the assertions' own words); the caller prints the rc.
pytest_lines() {
    grep -E 'passed|failed|error' "$1" | tail -1
    grep -E '^(FAILED|ERROR)' "$1" | head
    if [ -n "${2:-}" ]; then
        grep -E "^E  " "$1" | head -"$2"
    fi
}

# frame_sums LOG STAGE: bench/flip_sparse.py --frames --stages' LOG as frame:step+level set=user frame
# (STAGE's host/device ms) a frame, then frames 6–11's user ms and STAGE's device ms summed.
frame_sums() {
    awk -F'|' -v st="$2" '/^[0-9]+ \|/{f=$1; gsub(/ /,"",f); s=$3; gsub(/ /,"",s); split($5,a," "); u=$10; gsub(/ /,"",u);
        cur=f":"s"+"a[1]"="u; next}
        /step stages host\/device/ && cur!="" {match($0, st " [0-9.]+/[0-9.]+"); p=substr($0,RSTART+length(st)+1,RLENGTH-length(st)-1);
        printf "%s(%s) ", cur, p; split(p,b,"/"); if (f+0>=6 && f+0<=11) {d+=b[2]; us+=u}; cur=""}
        END{printf "\n   frames 6-11: user %.1f ms, %s device %.2f ms\n", us, st, d}' "$1"
}
