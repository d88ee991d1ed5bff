#!/bin/bash
# CPU time (user + system) and wall time of `turnback rewind` of a shell
# command's turn of N small files, two release binaries alternated ABBA
# (docs/BENCHMARKS.md, issue 26, third round). CPU time is moved far less
# by a shared machine's load than wall time.
#
#   OLD=path/to/turnback NEW=path/to/turnback [N=20000] [REPS=8] \
#     [BASE=/dev/shm/turnback-cpu] [OUT=rewind-cpu.txt] crates/turnback/benches/rewind_cpu_abba.sh
#
# Each line of OUT: binary, repetition, wall, user and system seconds.
set -eu
N=${N:-20000}; REPS=${REPS:-8}
OLD=${OLD:?the first binary}; NEW=${NEW:?the second binary}
base=${BASE:-/dev/shm/turnback-cpu}; rm -rf "$base"; mkdir -p "$base"
out=${OUT:-rewind-cpu.txt}; : > "$out"
for r in $(seq 1 $REPS); do
  if [ $((r % 4)) = 1 ] || [ $((r % 4)) = 0 ]; then order="old new"; else order="new old"; fi
  for who in $order; do
    bin=$OLD; [ $who = new ] && bin=$NEW
    d=$base/$who-$r; mkdir -p $d/p; export TURNBACK_DATA_DIR=$d/data HOME=$d/home
    python3 - "$d/p" "$N" <<'PY'
import os,sys
root,n=sys.argv[1],int(sys.argv[2])
for i in range(n):
    dd=os.path.join(root,f"d{i//100}"); os.makedirs(dd,exist_ok=True)
    open(os.path.join(dd,f"f{i}.txt"),"w").write(f"line {i}\n"*8)
PY
    (cd $d/p && $bin snapshot --turn t >/dev/null)
    python3 - "$d/p" <<'PY'
import os,sys
for dp,dn,fs in os.walk(sys.argv[1]):
    dn[:] = [x for x in dn if x != ".turnback"]
    for f in fs:
        with open(os.path.join(dp,f),"a") as h: h.write("more\n")
PY
    (cd $d/p && $bin snapshot --turn t --after >/dev/null)
    sync; sleep 2
    /usr/bin/time -f "$who $r %e %U %S" -a -o $out sh -c "cd $d/p && TURNBACK_NO_BACKGROUND=1 $bin rewind t >/dev/null"
  done
done
cat "$out"
rm -rf "$base"
