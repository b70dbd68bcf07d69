#!/usr/bin/env bash
# Issue 27's GPU checks in one script, for one lease of a GPU machine (about 10 minutes):
#   0. fused training (issue 33): step time against group size, fp32/bf16, compiled; member identity
#      (PHASES="fused toy-paper" for issue 33's check alone: then the toy_paper study trains fused;
#      FUSED_PLAN picks the measurements, TOY_EPOCHS, TOY_SCENARIO and TOY_WORKERS the study's part)
#   1. training throughput and GPU busy share, fp32 vs bf16, 0 vs 4 loader workers (bench_gpu.py throughput)
#   2. determinism on the device (bench_gpu.py determinism)
#   3. the paper configs' cost and peak memory on synthetic cases of the real sizes (bench_gpu.py paper-configs)
#   4. the paper-sized toy study (experiments/toy_paper.yaml) at one seed, with as many epochs as
#      the time left allows (150 at most), GPU use sampled by nvidia-smi throughout
#   5. local vs Ray (a local instance, train and evaluate jobs asking for 0.25 GPU) on a small study
# Usage (from the repository root): OUT=/some/folder BUDGET_S=540 bash benchmarks/device_checks.sh
# Python packages the machine lacks travel as wheels in .whl/ (and Ray, unpacked, in .whl/ray_site.tar.xz).
# DRY=1: the same steps at toy sizes on the CPU (to check this script itself).
set -u
DRY=${DRY:-0}
THROUGHPUT_ARGS=""; PAPER_ARGS=""; TOY_ARGS=()
FUSED_NET="--dims 3 --size 64 --width 8"; FUSED_K=1,4,8,16
if [ "$DRY" = 1 ]; then
  FUSED_NET="--dims 2 --size 32 --width 4"; FUSED_K=1,2
  THROUGHPUT_ARGS="--size 32 --cases 8 --s1 2 --s2 4 --workers 0 2"
  PAPER_ARGS="--configs lidc_texture --cases 2 --steps 1 --loader-workers 0"
  TOY_ARGS=('datasets=[{name: toy, label: toy_1, params: {scenario: "1", dims: 3, size: 32, train_cases: 16, val_cases: 4}}]' workers=2)
fi
PHASES=${PHASES:-"fused throughput determinism cuda-tests paper-configs toy-paper ray"}
want() { [[ " $PHASES " == *" $1 "* ]]; }
OUT=${OUT:-/tmp/device_out}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
START=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
phase() { echo "=== $1 at +$(($(date +%s) - START)) s ($(left) s left)"; }

phase setup
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc
SITE=/tmp/site
mkdir -p $SITE
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .whl/*.whl || echo "wheel install failed"
fi
if [ "$DRY" != 1 ] && [ -f .whl/ray_site.tar.xz ]; then
  tar -xJf .whl/ray_site.tar.xz -C $SITE && chmod -R +x $SITE/ray/core/src  # gcs_server, raylet
fi
mkdir -p /tmp/pp && ln -sfn "$PWD/plugins" /tmp/pp/values_seg_plugins
export PYTHONPATH=/tmp/pp:$PWD:$SITE
export PATH=$SITE/bin:$PATH
VS="python3 -m values_seg.cli"
python3 -c "import torch, values_seg, values_seg_plugins, omegaconf; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

if want fused; then
# Issue 33: step time against group size K for the paper's 3D network (fp32, bf16; torch.compile at
# K=8), then whether a member's weights depend on its group on CUDA (deterministic algorithms).
phase fused
DEV=cuda; [ "$DRY" = 1 ] && DEV=cpu
# FUSED_PLAN: what to measure, as precision:what items (k: step time against FUSED_K, compile: the
# compiled forward at K=8, identity: a member alone, twice, vs in groups of 2 and 8)
FUSED_PLAN=${FUSED_PLAN:-"fp32:k fp32:compile fp32:identity bf16:k bf16:compile bf16:identity"}
for ITEM in $FUSED_PLAN; do
  P=${ITEM%%:*}
  case ${ITEM#*:} in
    k) (cd benchmarks && timeout 150 python3 bench_fused_training.py --device $DEV $FUSED_NET --precision $P --k $FUSED_K --steps 5) ;;
    compile) (cd benchmarks && timeout 120 python3 bench_fused_training.py --device $DEV $FUSED_NET --precision $P --k 8 --steps 5 --compile) ;;
    identity) (cd benchmarks && timeout 90 python3 bench_fused_training.py --device $DEV $FUSED_NET --precision $P --identity --steps 3) ;;
  esac || echo "fused $ITEM failed"
done

fi
if want throughput; then
phase throughput
(cd benchmarks && timeout 120 python3 bench_gpu.py throughput $THROUGHPUT_ARGS --out "$OUT/throughput.json") || echo "throughput failed"

fi
if want determinism; then
phase determinism
(cd benchmarks && timeout 60 python3 bench_gpu.py determinism --out "$OUT/determinism.json") || echo "determinism failed"

fi
if want cuda-tests; then
phase cuda-tests
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/values_seg/engine/test_precision.py tests/values_seg/engine/test_loader.py \
  tests/values_seg/test_evaluation.py -k "cuda or device or precision or loader" 2>&1 | tail -15 || echo "cuda tests failed"

fi
if want paper-configs; then
phase paper-configs
(cd benchmarks && timeout 120 python3 bench_gpu.py paper-configs $PAPER_ARGS --out "$OUT/paper_configs.json") || echo "paper-configs failed"

fi
if want toy-paper; then
phase toy-paper
# Epochs that fit: 28 trainings (4 scenarios x 7) x 25 steps an epoch at the measured bf16 step time,
# one after another (on a GPU the engine trains them one by one; 12 side by side on one H100 kept it
# 100 % busy at 0.028 s per model-step against 0.018 s alone: no gain); 150 s kept for prediction,
# evaluation and the report, 70 s for the Ray check.
EPOCHS=$(python3 - "$OUT/throughput.json" "$(left)" <<'EOF'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))["rows"]
    bf16 = [r for r in rows if r["precision"] == "bf16" and r["loader_workers"] == 0][0]
    step = bf16["s_per_step"]
except Exception:
    step = 0.03
budget = int(sys.argv[2]) - 150 - 70
print(max(5, min(150, int(budget / (28 * 25 * 1.25 * step)))))
EOF
)
[ "$DRY" = 1 ] && EPOCHS=1
[ -n "${TOY_EPOCHS:-}" ] && EPOCHS=$TOY_EPOCHS
# TOY_SCENARIO=1: that scenario alone (Table 4a is toy 1's)
[ -n "${TOY_SCENARIO:-}" ] && TOY_ARGS+=("datasets=[{name: toy, label: toy_${TOY_SCENARIO}, params: {scenario: \"${TOY_SCENARIO}\", dims: 3, size: 64}}]")
echo "toy_paper epochs: $EPOCHS"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 > "$OUT/toy_paper_smi.csv" &
SMI=$!
T=$(date +%s)
# each line of the run's output with the seconds since its start (the phases' wall times)
timeout $(( $(left) - ${TOY_RESERVE_S:-70} )) $VS run experiments/toy_paper.yaml 'seeds=[0]' recipe.epochs=$EPOCHS executor=processes \
  workers=${TOY_WORKERS:-2} "${TOY_ARGS[@]}" --out /tmp/toy_paper 2>&1 | while IFS= read -r l; do echo "[+$(( $(date +%s) - T )) s] $l"; done
echo "toy_paper exited ${PIPESTATUS[0]}"
echo "toy_paper wall $(( $(date +%s) - T )) s"
kill $SMI
mkdir -p /tmp/bundle/toy_paper
for f in results.csv cases.csv report.md config.yaml failures.csv components.json run.json; do
  [ -f /tmp/toy_paper/$f ] && cp /tmp/toy_paper/$f /tmp/bundle/toy_paper/
done
[ -d /tmp/toy_paper/tables ] && cp -r /tmp/toy_paper/tables /tmp/bundle/toy_paper/
[ -d /tmp/toy_paper/figures ] && mkdir -p /tmp/bundle/toy_paper/figures && cp /tmp/toy_paper/figures/{paper,separation,ranks,fig}*.png /tmp/bundle/toy_paper/figures/ 2>/dev/null
python3 - /tmp/toy_paper <<'EOF' > "$OUT/toy_paper_trainings.json"
import json, sys, pathlib
rows = []
for p in pathlib.Path(sys.argv[1], "cache").rglob("*.json"):
    try:
        d = json.loads(p.read_text())
    except Exception:
        continue
    if isinstance(d, dict) and "train_seconds" in d:
        rows.append({k: d.get(k) for k in ("train_seconds", "steps", "final_loss", "device")})
print(json.dumps(rows))
EOF

fi
if want ray; then
phase ray
if [ "$(left)" -gt 40 ]; then
  RAYBUDGET=${RAY_BUDGET_S:-$(left)}
  timeout $(( (RAYBUDGET - 10) / 2 )) $VS run benchmarks/gpu_executor_check.yaml --executor local --out /tmp/exec_local || echo "local exited $?"
  timeout $(( (RAYBUDGET - 10) / 2 )) $VS run benchmarks/gpu_executor_check.yaml --executor ray --out /tmp/exec_ray || echo "ray exited $?"
  if cmp /tmp/exec_local/results.csv /tmp/exec_ray/results.csv; then echo "RAY == LOCAL: results.csv byte-identical"; else echo "RAY != LOCAL"; fi
  cp /tmp/exec_local/results.csv /tmp/bundle/exec_local_results.csv 2>/dev/null
  cp /tmp/exec_ray/results.csv /tmp/bundle/exec_ray_results.csv 2>/dev/null
fi

fi
phase pack
tar -czf "$OUT/bundle.tar.gz" -C /tmp bundle
ls -la "$OUT"
phase done
