#!/usr/bin/env bash
# The next GPU session's plan as stages, one device call each (a call may run 10 minutes): every
# stage writes its logs, JUnit XML and result JSONs under WORK/<stage>/, each command capped by
# `timeout -s KILL` so one hang cannot eat the call, and the whole of WORK is tarred into
# $OUT/r.tgz at the end (one file to bring back). Run from the repository root on the device:
#   echo <rev> > .rev   # here, before the call: the device copy has no .git
#   bash benchmarks/gpu_session.sh STAGE...
# Stages (docs/status.md, "What the next session should run first", says why and in what order):
#   verify   the GPU code that has never run: gemm_ws's gpu tests (tf32 multiplied swapped)
#            and gemm_fma's                                                              ~5 min
#   tests    the tf32 first call with a pack, test_gemm, test_gemm_gpu and test_autograd
#            (mostly unmarked tests: they run on the GPU when there is one)              ~4 min
#   rest     every other gpu-marked test (level 1/2, core, weight-only, launch, quantized,
#            rand, cli)                                                                     ~3 min
#   tf32     tf32 swapped vs copy-then-gemm_tma vs torch (1024–8192)                     ~4 min
#   fp32     gemm_fma's GPU tests, then FMA_SPACE vs SGEMM and the tile family             ~4 min
#   rows     the rows the forty-first session's logic changed, through calls: tf32 2048³ with
#            B row-major (swapped) and column-major (the tile exchanged), bf16 / fp16 1024³,
#            and controls (tf32 4096³ x @ W.t(), tf32 1024³)                          ~2 min
#   first    an sm_90 pack built here ($PACK instead if set) and installed under a
#            TESSERA_HOME of this run, then the first call (bf16, tf32) in fresh processes ~8 min
#   host     host overhead of small calls, level 1/2 (their kernels changed for batches) ~5 min
#   grid     the square grid against torch (`tessera bench gemm --preset grid`; 260 s at b739af9) ~5 min
#   fp32logic  the sm_90 logic the issue asks and the wheel lacks: fp32 skinny (M 1…256 on the LLM
#            layers' N, K) and batched (tune_gemm.sh; RESUME=DIR in the repository holding an
#            earlier call's journals continues them)                                        ~8 min
#   fp32big  fp32 16384³ (the tile and FMA families: others run seconds a call there) and tf32
#            batched 32³×1024 and 256³×64                                                  ~5 min
#   pdlws    gemm_ws's gpu result tests, then its programmatic dependent launch below a full wave
#            (measured: early) against off and exit (pdl_modes.sh, two rounds): bf16 / fp16
#            1024³, tf32 2048³                                                              ~9 min
#   pdlwq    gemm_wq_ws's main launch (weight-only decode; PDL off until timed) with programmatic
#            dependent launch off / early / exit (pdl_modes.sh DECODE=1: quantized.py
#            --decode-only, W4A16 / W8A16 at M = 1, 16 × 8192², alternating) within 170 s, then
#            its gpu test of chained calls with PDL forced early and at exit                 ~5 min
#   nt       tf32 tuned on x @ W.t() (B column-major: an NT layout logic file) at 4096³ and 8192³,
#            installed into this copy's shipped logic, then those calls and the NN ones (whose B
#            is copied K-major, so they select in the NT file too) through calls              ~6 min
#   cluster  gemm_ws on clusters of two sharing B by TMA multicast (benchmarks/cluster_probe.py, never
#            run on a GPU): checked on edge-tile sizes first (its compiles, and a hang, are capped
#            there), then fp8 and bf16 8192³ timed beside torch, the shipped gemm and the same
#            tiles without clusters (the JSON written after each problem)                      ~9 min
#   l12      the issue's level-1/2 rows (benchmarks/blas_level12.py: bench blas --preset full)   ~2 min
#   logicab  the square grid with the shipped logic and with the bf16 / fp16 / tf32 files as they were
#            before the fifty-second session's 4096³ rows (logic_ab.sh), alternating, once each  ~5 min
#   quant    the issue's quantized rows (quantized.py --rows-only: fp8, int8, W4A16 / W8A16)   ~3 min
#   fault    quantized.py --rows-only three times (the second with TESSERA_PDL=off): the forty-
#            eighth session's one `unspecified launch failure` at W4A16 M = 16, seen again or not  ~6 min
#   wqfix    the W4A16 fault's fix (stages a multiple of the warp groups): wq_fault_repro.py's loop
#            three processes each as shipped now, with 9 / 3 and 12 / 3; gemm_wq_ws's gpu tests
#            (the flushed-after-graphs one among them); then wq_ws_probe.py at W4A16 8192² M = 1, 16
#            (bf16, fp16) and N = 4096, K = 14336 (bf16, K split 2) over the legal stage counts   ~8 min
#   wqtune   the W4A16 rows whose 8 stages of 3 groups the fix refuses, tuned again over gemm_wq_ws
#            (bf16: M = 1, 16 at 8192² and at N = 4096, K = 14336, merged into this copy's
#            shipped logic; fp16: M = 1, 16 at 8192², the file's rows); copies come back    ~9 min
#   l1map    level1_map (axpy / scal / copy / rot) and level1_swap tuned apart in fp32 (2^20…2^26),
#            installed into this copy's shipped logic, then blas_level12.py with them          ~6 min
#   wqpdl    gemm_wq_ws's configurations with the PDL modes named (WqWsConfig.pdl) tuned at W8A16 /
#            W4A16 M = 1, 16 × 8192², merged into this copy's shipped logic (copies of the merged
#            files come back in the tarball, beside the tuner's), then the quantized rows    ~7 min
#   halves   gemm_ws with halves (each warp group a partition of its own, half of every tile, no
#            barrier between the groups; built offline, never run): its gpu tests, then the probe
#            against the shipped cooperative tiles at bf16 / fp16 / tf32 (K-major and copied)
#            4096³ and 8192³ and fp8 8192³                                                   ~8 min
#   ncutf32  Nsight Compute's stall reasons per SASS line (SourceCounters) of the tf32 4096³ kernels,
#            ours swapped and K-major beside cuBLAS's (ncu_targets.py tf32nn tf32nt): the report,
#            its source page as CSV and its details; the swapped loop's ~8 % gap          ~5 min
#   ncufp32  the same for IEEE fp32 4096³ (ncu_targets.py fp32): gemm_fma beside cuBLAS's SGEMM, with
#            launch, occupancy, instruction and workload sections                           ~4 min
#   fp32order  gemm_fma with its thread tile's registers and lanes down the rows
#            (benchmarks/variants/gemm_fma-registers-down-rows.patch; offline: FFMAs 29 → ~50 % in
#            place, fewer reads on one register bank): its GPU tests with the patch, then fp32
#            2048³ / 4096³ / 8192³ through calls, patched ("after") against shipped ("before") in
#            alternating processes (source_ab.sh, two rounds; H200 at 3d7c148: lost 1.6–2.0 %)  ~3 min
#   products float32 as bf16 products (gemm's precision bf16x9 / bf16x6, new): their tests on the GPU,
#            the accuracy of every float32 method against fp64 (fp32_products_probe.py), then
#            `tessera bench gemm --preset fp32` (IEEE, tf32x3, bf16x9, bf16x6 against SGEMM)   ~8 min
#   productsbench  that bench (fp32preset: it alone, ~2 min), then test_gemm, test_gemm_gpu and
#            test_fp32_products                                                              ~7 min
#   promote  a₀·b₀'s sums promoted per K step (emulated.PROMOTED_TILE): test_fp32_products,
#            test_gemm, test_gemm_gpu, test_autograd, then benchmarks/promote_probe.py (accuracy of
#            bf16x9 / bf16x6 promoted and plain against SGEMM; their time with the shipped
#            promoted tile and a 64-deep one)                                              ~7 min
#   smallgemm  the bf16 products' small GEMM on gemm_ws (emulated.SMALL_TILE) after its tidy-ups: the
#            gpu-marked test_packs (packs hold its launches), test_gemm_ws, test_fp32_products  ~7 min
#   longk    bf16 tuned on long-K shapes (weight gradients' K: M = N 1024…8192, K 16384…65536) over
#            gemm_ws, stream-K and split-K (the heuristic's pick always beside); RESUME=DIR in the
#            repository holding an earlier call's journal continues it; LONGK_MN="1536 3072" other
#            sides, LONGK_SIZES=MxNxK,… other shapes, FAMILIES other families, DTYPE=fp16 another
#            dtype, STREAM_K_MARGIN=0.05 stream-K rows only 5 % ahead of data-parallel ones (read
#            by tune_gemm.sh); merge what comes back                                              ~3 min
#   logicrows  the bf16 logic before the long-K rows against the shipped file and its wave-weighed
#            variants (results/tune-longk-h100-8b79f20/variants/), through calls in one process,
#            torch beside, on the shapes of ab-shapes.txt there (sampled from those the rows moved)
#            and of moved-k8192.txt (the shapes with K ≤ 8192 they move); VARIANTS=names of other
#            files there, EXTRA_SHAPES=MxNxK,… other added shapes, ROWS=another such folder   ~3 min
#   longkfix  bf16 tuned on the sampled shapes the long-K rows made slower (FIX_SIZES), merged here
#            into the variant with every long-K row, then logicrows' comparison with that file and
#            shapes outside the sample (EXTRA_SHAPES) added                                    ~8 min
#   wavesfresh  the shipped wave-weighed selection (wave_slack, the K and side limits, stream-K rows
#            passed over away from their size) against the same files without wave_slack (the
#            nearest row decides), through calls, torch beside, on SAMPLE (40) shapes a dtype drawn
#            with SEED (62) from those the slack moves in a sweep no earlier A/B used
#            (FRESH_SIDES × FRESH_KS); DTYPES="bf16 fp16"                                     ~5 min
#   prefill  the prefill preset (M 512, 1024, 2048 × the LLM layers' N, K: no rows between the skinny
#            ones and the squares) tuned over FAMILIES (gemm_ws, gemm_tma), TUNE_S (180) s a dtype
#            (DTYPES="bf16 fp16"), each written with its shipped file's wave_slack and wave_exponent
#            (so it merges); SIZES (prefill) names other presets or sizes                     ~6 min
#   prefillab  the files with the prefill rows against those before (logic_rows_ab.py, 3 rounds) on
#            DTYPES' shapes in ROWS (tunes' folders: their own sizes the rows move and 20 drawn
#            from M 384–3072 × N 3072–13824 × K 3072–13824), AB_S (280) s a dtype; CONTROL=1 times the
#            file before twice (an A/A control: what the order of the calls alone gives); AFTER names
#            the variant other than `prefill` (variants/<dtype>-<AFTER>.yaml)                   ~9 min
#   narrowm  `prefill` at SIZES (the prompt shapes with M 384 / 640 / 768 tf32 was tuned at in the
#            sixty-fourth session), each tuned file merged into the shipped one, then
#            logic_rows_ab.py (3 rounds, the file before twice) on the shapes the rows move in
#            M 384, 640, 768, 20 drawn (seed 64) from M 320–1024 and SHORT_SAMPLE (12) drawn from
#            its moves at a short K (SHORT_KS 256–1536: rows reach there, sixty-seventh session,
#            rows-shortk/; SHORT_SAMPLE=0 leaves them out); DTYPES="bf16 fp16",
#            TUNE_S (180) and AB_S (150) s a dtype; two dtypes ran in 6 min with TUNE_S=110
#            AB_S=140, before graph_ms's untimed replays (~+40 % a timing): one dtype a call now ~9 min
#   order    order_probe.py: does a graph-replayed time depend on the kernel that ran before it (torch
#            twice, then Tessera twice, 4 rounds; the grid's squares in bf16/fp16/tf32/fp32 and four
#            prefill shapes), without graph_ms's untimed replays and with them (the default since
#            the sixty-fourth session: do they remove the effect?)                         ~7 min
#   tf32waves  tf32's file with the prefill rows against it with wave_slack 0.7 (shipped since; and
#            again, the A/A) on the 40 shapes the slack moves (tune-prefill-tf32-h100-a349d38/),
#            then `tessera bench gemm` at tf32 1024x4096x14336 and bf16 4096³ (the bench's order
#            alternating, on a GPU)                                                          ~2 min
#   waveexp  the bf16 / fp16 files as they were against copies with wave_exponent 0.75 at slack 0.7 and
#            1.0 (and the shipped file again, the A/A) on 40 shapes a dtype the copies move
#            (wave-exponent-h100-a2e6442/; a sweep no earlier A/B used; the damped one shipped
#            since), 3 rounds, AB_S (200) s a dtype; ROWS names another such folder (its
#            variants/<dtype>-{shipped,damped,wide-damped}.yaml and <dtype>-shapes.txt)          ~6 min
#   symv     symv's finish overlapping its walk (SymvConfig.overlap_finish, never run on a GPU): the
#            symv tests on the GPU (a chain of calls with it), then symv_floor.py --shipped-only (the
#            variants checked against the shipped call, then timed from graphs beside copy)  ~6 min
#   gemvb    strided-batched gemv tiles against torch.bmm (gemv_batched_probe.py: the issue's 256² ×
#            1024 row ran 0.87× on the H200 at 9678d9a, 1.06× on an H100 at d6bc69d), then the
#            GPU tests of blas.repeat and test_launch (new scalars, one tensor twice)            ~4 min
#   rawab    repeat calls' host cost and back-to-back GEMMs (bf16 / tf32 1024³, bf16 2048³) with
#            replays through the kernel's C launcher and through Triton's wrappers
#            (TESSERA_RAW_LAUNCH 1 / 0), alternating, two rounds                                ~4 min
#   quanttests  test_quantized on the GPU (gemm_wq's out= recipes: CPU-tested only so far)   ~3 min
#   tf32overlap  tf32 8192³ / 16384³ with B's K-major copy in column panels on a second stream
#            beside the GEMM (tf32_copy_overlap.py, never run on a GPU): against the shipped call,
#            the kernel alone, the copy alone, the panels in sequence and torch.matmul    ~3 min
#   fuzz     fuzz_gemm, fuzz_level1, fuzz_level2, fuzz_matmul and fuzz_quantized's scaled half
#            on the GPU (45–80 s each and their compiles, capped at 540 s in all)          ~9 min
#   tf32transform  tf32 on gemm_ws with each stage transformed in shared memory
#            (tf32_transform_probe.py): B transposed K-major (no copy before the call) and both
#            operands rounded to nearest as cuBLAS rounds them, by a producer warp group (run on an
#            H100 at 429cd79: exact, 0.47–0.54× torch) or by the multiplying warps while the last
#            wgmma runs (never run), on the 128 × 256 tile and on 256 × 128 (B's transform half
#            the shared-memory traffic a step there); checked bit for bit against gemm_ws on a
#            K-major B, the bias at 2048³, then timed at 4096³ and 8192³ beside torch, the
#            shipped call and gemm_ws alone on a K-major B                                    ~4 min
#   unmarked the tf32 rounding probe (tf32_rounding_probe.py: Tessera's and cuBLAS's TF32 against
#            truncated and rounded operands, and the bias over a long K), then the tests that
#            `tests` and `rest` leave out: the unmarked ones of test_blas_level12 and test_rand
#            (fp64 into 16-bit stores bit for bit, the zero-increment axpy, rand's MRG
#            conversion, Poisson's int32 bound) and test_gemm's tf32 ones (K = 1 and 2)        ~6 min
# A stage that is not named is not run; unknown names stop the script before anything runs. A name
# may carry a GPU filter, GPU/stage, run only where nvidia-smi's name holds GPU: a call asked for an
# H200 may get an H100, so `H200/quant H200/l1map H100/rest` times on the issues' GPU only and
# spends an H100's time on tests.
# A lent machine can be taken back mid-call, and then nothing of the call comes back: one short
# stage a call.
set -uo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:?the device tool sets OUT}
WORK=${WORK:-$(mktemp -d /tmp/gpu-session.XXXXXX)}  # fresh: a lent machine may hold older runs' files
rev=$(cat .rev 2>/dev/null || git log -1 --format=%H 2>/dev/null || echo unknown)
export PYTHONPATH=$PWD TESSERA_GIT_REV=$rev
mkdir -p "$WORK"
# A WORK given from outside may hold files already: a shared WORK's earlier stages, or (seen in the
# seventy-second session, WORK=$(mktemp -d)) folders of another day's runs; they go into the tarball.
held=$(find "$WORK" -mindepth 1 -maxdepth 1 -printf '%f %TY-%Tm-%Td %TH:%TM\n' 2>/dev/null)
[ -n "$held" ] && printf 'WORK %s already holds (they go into the tarball too):\n%s\n' "$WORK" "$held"

capped() {  # capped SECONDS NAME CMD...: run CMD, stdout+stderr to NAME.txt, its exit status logged
    local seconds=$1 name=$2
    shift 2
    local start=$SECONDS
    timeout -s KILL "$seconds" "$@" > "$dir/$name.txt" 2>&1
    local rc=$?
    echo "$name rc=$rc $((SECONDS - start))s" | tee -a "$dir/summary.txt"
    tail -3 "$dir/$name.txt"
    return $rc
}

verify() {
    capped 280 ws "$PY" -m pytest -m gpu tests/test_gemm_ws.py -q -rs --junitxml="$dir/ws.xml"  # halves: +8
    capped 200 fma "$PY" -m pytest -m gpu tests/test_gemm_fma.py -q -rs --junitxml="$dir/fma.xml"
}

tests() {
    capped 120 first-call "$PY" -m pytest -m gpu tests/test_packs.py -q -rs -k first_call \
        --junitxml="$dir/first-call.xml"
    # 37 s with Triton's cache warm, over 160 s cold (the forty-second session's first call was cut there)
    capped 280 gemm "$PY" -m pytest tests/test_gemm.py tests/test_gemm_gpu.py tests/test_autograd.py -q -rs -x \
        --junitxml="$dir/gemm.xml"
}

rest() {  # the gpu-marked tests that verify and tests leave out
    capped 400 rest "$PY" -m pytest -m gpu tests/test_blas_level12.py tests/test_core.py tests/test_gemm_wq_ws.py \
        tests/test_launch.py tests/test_quantized.py tests/test_rand.py tests/test_cli.py -q -rs --junitxml="$dir/rest.xml"
}

tf32() {
    capped 240 tf32 "$PY" benchmarks/gemm_gluon_probe.py "$dir/tf32.json" --dtypes tf32 \
        --sizes 1024,2048,4096,8192
}

fp32() {  # gemm_fma: its GPU tests first, then the probe
    capped 200 fma-tests "$PY" -m pytest -m gpu tests/test_gemm_fma.py -q -rs --junitxml="$dir/fma.xml"
    capped 280 fp32 "$PY" benchmarks/sgemm_gluon_probe.py "$dir/fp32.json"
}

rows() {
    local i=0 args
    for args in "-m 2048 -n 2048 -k 2048 --dtype tf32" "-m 2048 -n 2048 -k 2048 --dtype tf32 --trans-b" \
                "-m 1024 -n 1024 -k 1024 --dtype bf16" "-m 1024 -n 1024 -k 1024 --dtype fp16" \
                "-m 4096 -n 4096 -k 4096 --dtype tf32 --trans-b" "-m 1024 -n 1024 -k 1024 --dtype tf32"; do
        i=$((i + 1))
        # shellcheck disable=SC2086  # args are words on purpose
        capped 60 "row-$i" "$PY" -m tessera bench gemm $args --rounds 3 --json "$dir/row-$i.json"
    done
}

first() {  # the pack and its install stay out of WORK (out of the tarball)
    local pack=${PACK:-$WORK-sm_90.tar}  # beside WORK, out of the tarball
    export TESSERA_HOME=$WORK-home
    [ -f "$pack" ] || capped 240 pack-build "$PY" -m tessera pack build --arch sm_90 --precompile -o "$pack"
    # a pack built from other sources is refused (its kernels may differ): then the first calls would
    # time the rows without a pack only (the fifty-fourth session spent 156 s so), so stop here
    if ! capped 60 pack-install "$PY" -m tessera pack install "$pack"; then
        echo "first: the pack was not installed; rebuild it from this tree" | tee -a "$dir/summary.txt"
        unset TESSERA_HOME
        return
    fi
    capped 200 first-call-bf16 "$PY" benchmarks/first_call.py "$dir/first-call-bf16.json"
    capped 200 first-call-tf32 "$PY" benchmarks/first_call.py "$dir/first-call-tf32.json" --dtype tf32
    TESSERA_KERNEL_CACHE=0 capped 60 profile "$PY" benchmarks/first_call.py --child tessera --profile
    unset TESSERA_HOME
}

host() {
    capped 90 host-overhead "$PY" benchmarks/host_overhead.py "$dir/host-overhead.json"
    capped 200 level12 "$PY" benchmarks/blas_level12.py "$dir/blas-l12.json"
}

nt() {
    capped 220 tune-nt "$PY" -m tessera tune gemm --dtype tf32 --layout NT --sizes 4096x4096x4096,8192x8192x8192 \
        --families gemm_tma,gemm_ws --max-distance 0.7 --budget-minutes 2.8 --out "$dir/tune"
    cp "$dir/tune/sm_90/blas.gemm.tf32.NT.yaml" tessera/logic/sm_90/ && echo "installed the NT logic" \
        | tee -a "$dir/summary.txt"
    local i=0 args
    for args in "-m 4096 -n 4096 -k 4096 --dtype tf32 --trans-b" "-m 8192 -n 8192 -k 8192 --dtype tf32 --trans-b" \
                "-m 4096 -n 4096 -k 4096 --dtype tf32" "-m 8192 -n 8192 -k 8192 --dtype tf32"; do
        i=$((i + 1))
        # shellcheck disable=SC2086  # args are words on purpose
        capped 35 "nt-row-$i" "$PY" -m tessera bench gemm $args --rounds 3 --json "$dir/nt-row-$i.json"
    done
}

fp32logic() {  # merge what comes back: tessera logic merge SHIPPED NEW -o SHIPPED
    mkdir -p "$dir/tune/sm_90"
    if [ -n "${RESUME:-}" ]; then cp "$RESUME"/*.journal.jsonl "$dir/tune/sm_90/"; fi
    SIZES=skinny,batched capped 530 tune-fp32 bash benchmarks/tune_gemm.sh "$dir/tune" 500 fp32
}

fp32big() {  # its own folder: a journal of other sizes would make tune_gemm.sh resume that run
    SIZES=16384x16384x16384 FAMILIES=gemm_tile,gemm_fma capped 280 tune-fp32 bash benchmarks/tune_gemm.sh \
        "$dir/tune" 260 fp32
    SIZES=32x32x32x1024,256x256x256x64 capped 100 tune-tf32 bash benchmarks/tune_gemm.sh "$dir/tune" 85 tf32
}

pdlws() {
    capped 200 pdl-tests "$PY" -m pytest -m gpu tests/test_gemm_ws.py -q -rs -k "dependent_launches or results_against" \
        --junitxml="$dir/pdl-tests.xml"
    CASES="-m 1024 -n 1024 -k 1024 --dtype bf16;-m 1024 -n 1024 -k 1024 --dtype fp16;-m 2048 -n 2048 -k 2048 --dtype tf32" \
        MODES="0 measured exit" capped 330 pdl-modes bash benchmarks/pdl_modes.sh "$dir/modes" 300
    cat "$dir/modes/modes.txt"
}

pdlwq() {
    CASES="" DECODE=1 MODES="0 early exit" capped 185 pdl-modes bash benchmarks/pdl_modes.sh "$dir/modes" 170
    cat "$dir/modes/modes.txt"
    capped 120 pdl-tests "$PY" -m pytest -m gpu tests/test_gemm_wq_ws.py -q -rs -k dependent_launches \
        --junitxml="$dir/pdl-tests.xml"
}

cluster() {  # the check's sizes are multiples of 16 as 8192 is (one binary serves both commands);
    # 2000 × 2064 leaves partial cluster tiles along M and N; at M = 1920 the last cluster tile's
    # second program has no row in the matrix (its copies all out of bounds, its store clipped away)
    capped 240 cluster-check "$PY" benchmarks/cluster_probe.py "$dir/check.json" --dtypes fp8,bf16 \
        --sizes 2000x2064x1024,1920x2064x1024 --rounds 0
    grep -q '"error"' "$dir/check.json" 2>/dev/null && echo "cluster-check found errors" | tee -a "$dir/summary.txt"
    capped 300 cluster "$PY" benchmarks/cluster_probe.py "$dir/cluster.json" --dtypes fp8,bf16 --sizes 8192 \
        --rounds 3
}

symv() {
    capped 200 symv-tests "$PY" -m pytest tests/test_blas_level12.py -q -rs -k symv \
        --junitxml="$dir/symv-tests.xml"
    capped 200 symv-floor "$PY" benchmarks/symv_floor.py "$dir/symv-floor.json" --shipped-only
}

quant() {
    capped 200 quantized "$PY" benchmarks/quantized.py "$dir/quantized.json" --rows-only
}

fault() {  # a run that dies keeps its log; the next still runs
    capped 200 rows-1 "$PY" benchmarks/quantized.py "$dir/rows-1.json" --rows-only
    TESSERA_PDL=off capped 200 rows-pdl-off "$PY" benchmarks/quantized.py "$dir/rows-pdl-off.json" --rows-only
    capped 200 rows-2 "$PY" benchmarks/quantized.py "$dir/rows-2.json" --rows-only
}

wqfix() {
    local c
    for c in shipped 9,3 12,3; do
        local env=()
        [ "$c" = shipped ] || env=(REPRO_WS=$c)
        capped 50 "loop-$c" env "${env[@]}" "$PY" benchmarks/wq_fault_repro.py "$dir/loop-$c.json" --runs 3 \
            --variants loop
        tail -1 "$dir/loop-$c.txt" | tee -a "$dir/summary.txt"
    done
    capped 200 tests "$PY" -m pytest -m gpu tests/test_gemm_wq_ws.py -q -rs --junitxml="$dir/tests.xml"
    tail -1 "$dir/tests.txt" | tee -a "$dir/summary.txt"
    local dtype
    for dtype in bf16 fp16; do
        capped 80 "probe-$dtype" "$PY" benchmarks/wq_ws_probe.py "$dir/probe-$dtype.json" --dtype "$dtype" \
            --configs 6:3,9:3,12:3,8:4,12:4
    done
    capped 80 probe-split "$PY" benchmarks/wq_ws_probe.py "$dir/probe-split.json" --n 4096 --k 14336 \
        --configs 6:3:2,9:3:2,12:3:2,8:4:2
    grep -h "× torch" "$dir"/probe-*.txt | tee -a "$dir/summary.txt"
}

merged_wq() {  # merged_wq DTYPE: the tuner's gemm_wq file of DTYPE folded into this copy's shipped
    # one (tessera logic merge), a copy of the result beside the stage's results
    local shipped=tessera/logic/sm_90/blas.gemm_wq.$1.yaml
    timeout -s KILL 60 "$PY" -m tessera logic merge "$shipped" "$dir/tune/sm_90/blas.gemm_wq.$1.yaml" \
        -o "$shipped" > "$dir/merge-$1.txt" 2>&1 && cp "$shipped" "$dir/"
}

wqtune() {  # the rows the stage rule took out of the shipped W4A16 logic, tuned again
    local sizes=1x8192x8192,16x8192x8192,1x4096x14336,16x4096x14336
    capped 330 tune-int4_bf16 "$PY" -m tessera tune gemm --dtype int4_bf16 --sizes "$sizes" \
        --families gemm_wq_ws --max-distance 0.5 --no-plot --out "$dir/tune"
    merged_wq int4_bf16
    capped 200 tune-int4_fp16 "$PY" -m tessera tune gemm --dtype int4_fp16 --sizes 1x8192x8192,16x8192x8192 \
        --families gemm_wq_ws --max-distance 0.5 --no-plot --out "$dir/tune"
    grep -h "x8192\|x14336" "$dir"/tune-*.txt | tee -a "$dir/summary.txt"
}

l1map() {
    local op
    for op in map swap; do
        capped 120 "tune-$op" "$PY" -m tessera tune level1 --op "$op" --dtype fp32 --no-plot --out "$dir/tune"
        cp "$dir/tune/sm_90/blas.level1_$op.fp32.yaml" tessera/logic/sm_90/ && echo "installed level1_$op" \
            | tee -a "$dir/summary.txt"
    done
    capped 240 level12 "$PY" benchmarks/blas_level12.py "$dir/blas-l12.json"
}

wqpdl() {  # gemm_wq_ws's configurations, PDL modes named among them (WqWsConfig.pdl), at the decode rows
    local dtype
    for dtype in int8_bf16 int4_bf16; do
        capped 200 "tune-$dtype" "$PY" -m tessera tune gemm --dtype "$dtype" --sizes 1x8192x8192,16x8192x8192 \
            --families gemm_wq_ws --max-distance 0.5 --no-plot --out "$dir/tune"
        merged_wq "$dtype" && echo "merged $dtype" | tee -a "$dir/summary.txt"
    done
    capped 200 quantized "$PY" benchmarks/quantized.py "$dir/quantized.json" --rows-only
}

grid() {
    capped 540 grid "$PY" -m tessera bench gemm --preset grid --json "$dir/grid.json"
}

logicab() {  # the fifty-second session's rows were chosen on H100s: the same A/B on the GPU at hand
    CASES="--preset grid" ROUNDS=1 capped 520 logicab bash benchmarks/logic_ab.sh "$dir/ab" 500 \
        benchmarks/results/logic-ab-h100-07206c2/logic-before
    tail -2 "$dir/ab/ab.txt"
}

halves() {  # built in the fifty-third session offline; the shipped tiles beside, then 4 stages with D split
    # (caps sum to 490 s: the stage must end, and tar, within a 600 s call)
    capped 150 halves-tests "$PY" -m pytest -m gpu tests/test_gemm_ws.py -q -rs -k halves \
        --junitxml="$dir/halves-tests.xml"
    capped 140 w16 "$PY" benchmarks/gemm_gluon_probe.py "$dir/w16.json" --dtypes bf16,fp16 --sizes 4096,8192 \
        --configs 128x256x64:3:8:8,128x256x64:3:8:8:h,128x256x64:4:8:8:2:h
    capped 110 tf32 "$PY" benchmarks/gemm_gluon_probe.py "$dir/tf32.json" --dtypes tf32 --sizes 4096,8192 \
        --configs 128x256x32:3:8:8:2,128x256x32:3:8:8:2:h,128x256x32:4:8:8:2:h
    capped 90 fp8 "$PY" benchmarks/gemm_gluon_probe.py "$dir/fp8.json" --dtypes fp8 --sizes 8192 \
        --configs 128x256x128:3:8:8,128x256x128:3:8:8:h,128x256x128:4:8:8:2:h
    grep -h " us " "$dir"/w16.txt "$dir"/tf32.txt "$dir"/fp8.txt | tee -a "$dir/summary.txt"  # the timed rows
}

ncutf32() {  # where the swapped tf32 loop's warps wait (the fifty-second session's summary: 80.1 % of
    # the tensor pipe against cuBLAS's 87.9 % on the same design, ncu-tf32-h100-e049fd5/)
    local ncu=${NCU:-/usr/local/cuda/bin/ncu}
    capped 300 ncu-report "$ncu" --profile-from-start off --clock-control none --section SourceCounters \
        --section WarpStateStats --section SpeedOfLight -f -o "$dir/tf32" "$PY" benchmarks/ncu_targets.py tf32nn tf32nt
    capped 60 ncu-source "$ncu" --import "$dir/tf32.ncu-rep" --page source --print-source sass --csv
    capped 60 ncu-details "$ncu" --import "$dir/tf32.ncu-rep" --page details --print-details all
}

ncufp32() {  # IEEE fp32 4096³: gemm_fma beside cuBLAS's SGEMM (0.90× in the grid): tile, registers,
    # issue-slot use, instruction mix and stall reasons per SASS line, cuBLAS's loop included
    local ncu=${NCU:-/usr/local/cuda/bin/ncu}
    capped 300 ncu-report "$ncu" --profile-from-start off --clock-control none --section SourceCounters \
        --section WarpStateStats --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        -f -o "$dir/fp32" "$PY" benchmarks/ncu_targets.py fp32
    capped 60 ncu-source "$ncu" --import "$dir/fp32.ncu-rep" --page source --print-source sass --csv
    capped 60 ncu-details "$ncu" --import "$dir/fp32.ncu-rep" --page details --print-details all
}

fp32order() {  # the patch applied to this copy for the stage, the shipped file put back after
    local target=tessera/blas/kernels/gemm_fma.py
    cp "$target" "$dir/gemm_fma-shipped.py"
    local variant=benchmarks/variants/gemm_fma-registers-down-rows.patch
    { patch -p1 < "$variant" || git apply "$variant"; } > "$dir/patch.txt" 2>&1 || {
        echo "fp32order: the patch did not apply" | tee -a "$dir/summary.txt"; return 1; }
    capped 200 fma-tests "$PY" -m pytest -m gpu tests/test_gemm_fma.py -q -rs --junitxml="$dir/fma.xml" && \
    capped 330 ab bash benchmarks/source_ab.sh "$dir/ab" 2 320 "$target" "$dir/gemm_fma-shipped.py" \
        bash -c "for s in 2048 4096 8192; do $PY -m tessera bench gemm -m \$s -n \$s -k \$s --dtype fp32 \
                 --json {json}.\$s.json; done"
    cp "$dir/gemm_fma-shipped.py" "$target"
}

products() {  # float32 as bf16 products (precision bf16x9 / bf16x6): tests, accuracy by method, speed
    capped 120 products-tests "$PY" -m pytest tests/test_fp32_products.py -q -rs --junitxml="$dir/products.xml"
    capped 100 accuracy "$PY" benchmarks/fp32_products_probe.py "$dir/fp32-products-accuracy.json"
    capped 330 fp32 "$PY" -m tessera bench gemm --preset fp32 --json "$dir/fp32.json"
}

promote() {  # a₀·b₀ promoted: the GEMM files' tests first, then the probe
    capped 300 gemm "$PY" -m pytest tests/test_fp32_products.py tests/test_gemm.py tests/test_gemm_gpu.py \
        tests/test_autograd.py -q -rs --junitxml="$dir/gemm.xml"
    capped 220 probe "$PY" benchmarks/promote_probe.py "$dir/promote.json" \
        --tiles "128x128x128 s3 split2,128x128x64 s4"
}

fp32preset() {  # the fp32 preset's timing alone (IEEE, tf32x3, bf16x9, bf16x6 against SGEMM)
    capped 160 fp32 "$PY" -m tessera bench gemm --preset fp32 --json "$dir/fp32.json"
}

productsbench() {  # the fp32 preset's timing, then the GEMM files
    fp32preset
    capped 230 gemm "$PY" -m pytest tests/test_gemm.py tests/test_gemm_gpu.py tests/test_fp32_products.py -q -rs -x \
        --junitxml="$dir/gemm.xml"
}

longk() {  # its own folder (a journal of other sizes would make tune_gemm.sh resume that run)
    mkdir -p "$dir/tune/sm_90"
    if [ -n "${RESUME:-}" ]; then cp "$RESUME"/*.journal.jsonl "$dir/tune/sm_90/"; fi
    local sizes="" mn k
    for k in 16384 32768 65536; do for mn in ${LONGK_MN:-4096 2048 8192 1024}; do sizes+="${mn}x${mn}x${k},"; done; done
    SIZES=${LONGK_SIZES:-${sizes%,}} FAMILIES=${FAMILIES:-gemm_ws,gemm_streamk,gemm_splitk} capped 570 tune \
        bash benchmarks/tune_gemm.sh "$dir/tune" 550 "${DTYPE:-bf16}"
}

logicrows() {  # before the long-K rows, then each set of them (results/tune-longk-h100-8b79f20/variants/)
    local rows=${ROWS:-benchmarks/results/tune-longk-h100-8b79f20} files=() v
    for v in ${VARIANTS:-before with-fixes-no3072 waves-07 waves-10}; do
        files+=("$v=$rows/variants/$v.yaml"); done
    local extra=${EXTRA_SHAPES-$(cat "$rows/moved-k8192.txt")}  # EXTRA_SHAPES= (empty): none
    capped 540 ab "$PY" benchmarks/logic_rows_ab.py "$(cat "$rows/ab-shapes.txt")${extra:+,$extra}" \
        "$dir/ab.json" "${files[@]}"
}

longkfix() {
    local rows=benchmarks/results/tune-longk-h100-8b79f20
    mkdir -p "$dir/tune/sm_90"
    SIZES=${FIX_SIZES:?} FAMILIES=gemm_ws,gemm_streamk,gemm_tma capped 270 tune-bf16 \
        bash benchmarks/tune_gemm.sh "$dir/tune" 260 bf16
    "$PY" -m tessera logic merge "$rows/variants/squares-between-rectangles.yaml" \
        "$dir/tune/sm_90/blas.gemm.bf16.yaml" -o "$dir/with-fixes.yaml" > "$dir/merge.txt" 2>&1
    capped 270 ab "$PY" benchmarks/logic_rows_ab.py "$(cat "$rows/ab-shapes.txt"),${EXTRA_SHAPES:?}" "$dir/ab.json" \
        "before=$rows/variants/before.yaml" "rows=$rows/variants/squares-between-rectangles.yaml" \
        "fixes=$dir/with-fixes.yaml"
}

wavesfresh() {  # shipped (wave-weighed) against nearest-row copies, on freshly drawn moved shapes
    local dt shipped shapes
    for dt in ${DTYPES:-bf16 fp16}; do
        shipped=tessera/logic/sm_90/blas.gemm.$dt.yaml
        "$PY" -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); d.pop("wave_slack")
open(sys.argv[2], "w").write(yaml.safe_dump(d, sort_keys=False))' "$shipped" "$dir/$dt-nearest.yaml"
        shapes=$("$PY" benchmarks/logic_moves.py "$dir/$dt-nearest.yaml" "$shipped" \
            --sides "${FRESH_SIDES:-1152,1792,2816,3840,5632,9216}" --ks "${FRESH_KS:-2304,4608,9216,18432,36864}" \
            --sample "${SAMPLE:-40}" --seed "${SEED:-62}" 2> "$dir/$dt-moves.txt")
        echo "$shapes" > "$dir/$dt-shapes.txt"
        capped 270 "ab-$dt" "$PY" benchmarks/logic_rows_ab.py "$shapes" "$dir/ab-$dt.json" \
            "nearest=$dir/$dt-nearest.yaml" "shipped=$shipped" --rounds 3
    done
}

prefill() {  # the prefill preset (M 512, 1024, 2048 x the LLM layers) tuned apart per dtype
    local dt slack exponent cap depth
    mkdir -p "$dir/tune"
    for dt in ${DTYPES:-bf16 fp16}; do
        # the shipped file's selection rules (none: empty), so that the tuned file merges into it
        read -r slack exponent cap depth < <("$PY" -c 'import sys
from tessera.tuning import logic
f = logic.load_logic(sys.argv[1])
print(*(logic.rule_text(getattr(f, rule)) if getattr(f, rule) is not None else "-"
        for rule in ("wave_slack", "wave_exponent", "wave_ratio_max", "min_split_depth")))' \
            "tessera/logic/sm_90/blas.gemm.$dt.yaml")
        [ "$slack" = - ] && slack=
        [ "$exponent" = - ] && exponent=
        [ "$cap" = - ] && cap=
        [ "$depth" = - ] && depth=
        SIZES=${SIZES:-prefill} WAVE_SLACK=$slack WAVE_EXPONENT=$exponent WAVE_RATIO_MAX=$cap MIN_SPLIT_DEPTH=$depth \
            FAMILIES=${FAMILIES:-gemm_ws,gemm_tma} \
            capped $((${TUNE_S:-180} + 20)) "tune-$dt" bash benchmarks/tune_gemm.sh "$dir/tune" "${TUNE_S:-180}" "$dt"
    done
}

prefillab() {  # the files with the prefill rows against those before, through calls (ROWS: the tunes' folders)
    local rows folder dt
    for dt in ${DTYPES:-bf16 fp16}; do
        rows=
        for folder in ${ROWS:-benchmarks/results/tune-prefill-h100-d919754}; do  # the last holding dt's
            [ -f "$folder/$dt-shapes.txt" ] && rows=$folder
        done
        [ -n "$rows" ] || { echo "no $dt-shapes.txt in ROWS" | tee -a "$dir/summary.txt"; continue; }
        capped "${AB_S:-280}" "ab-$dt" "$PY" benchmarks/logic_rows_ab.py "$(cat "$rows/$dt-shapes.txt")" \
            "$dir/ab-$dt.json" "before=$rows/variants/$dt-before.yaml" "${AFTER:-prefill}=$rows/variants/$dt-${AFTER:-prefill}.yaml" \
            ${CONTROL:+"again=$rows/variants/$dt-before.yaml"} --rounds 3
    done
}

smallgemm() {  # the gpu-marked tests of every file the small products' GEMM touches
    capped 150 packs "$PY" -m pytest -m gpu tests/test_packs.py -q -rs --junitxml="$dir/packs.xml"
    capped 250 ws "$PY" -m pytest -m gpu tests/test_gemm_ws.py -q -rs --junitxml="$dir/ws.xml"
    capped 150 products-tests "$PY" -m pytest tests/test_fp32_products.py -q -rs --junitxml="$dir/products.xml"
}

tf32waves() {  # tf32's file with the 16-bit files' wave rule, through calls; then the bench's rounds
    local rows=benchmarks/results/tune-prefill-tf32-h100-a349d38 shape
    capped 200 ab-tf32-waves "$PY" benchmarks/logic_rows_ab.py "$(cat "$rows/tf32-waves-shapes.txt")" \
        "$dir/ab-tf32-waves.json" "nearest=$rows/variants/tf32-prefill.yaml" "waves=$rows/variants/tf32-waves.yaml" \
        "again=$rows/variants/tf32-prefill.yaml" --rounds 3
    for shape in "tf32 1024 4096 14336" "bf16 4096 4096 4096"; do
        set -- $shape
        capped 60 "bench-$1-$2x$3x$4" "$PY" -m tessera bench gemm --dtype "$1" -m "$2" -n "$3" -k "$4" --rounds 4 \
            --json "$dir/bench-$1-$2x$3x$4.json"
    done
}

waveexp() {  # the wave score damped (wave_exponent), through calls
    local rows=${ROWS:-benchmarks/results/wave-exponent-h100-a2e6442} dt
    for dt in ${DTYPES:-bf16 fp16}; do
        capped "${AB_S:-200}" "ab-$dt" "$PY" benchmarks/logic_rows_ab.py "$(cat "$rows/$dt-shapes.txt")" \
            "$dir/ab-$dt.json" "shipped=$rows/variants/$dt-shipped.yaml" "damped=$rows/variants/$dt-damped.yaml" \
            "wide=$rows/variants/$dt-wide-damped.yaml" "again=$rows/variants/$dt-shipped.yaml" --rounds 3
    done
}

narrowm() {  # prompt shapes with narrow M tuned, merged and timed against the shipped file in one call
    local dt shipped own drawn short shapes
    # DTYPES, FAMILIES and TUNE_S as `prefill` takes them; SIZES: tf32's narrow-M sizes by default
    SIZES=${SIZES:-384x4096x4096,384x14336x4096,384x4096x14336,384x3072x13824,384x13824x3072,768x4096x4096,\
768x14336x4096,768x4096x14336,768x3072x13824,768x13824x3072,640x11008x5120,640x5120x11008} prefill
    mkdir -p "$dir/variants"
    for dt in ${DTYPES:-bf16 fp16}; do
        shipped=tessera/logic/sm_90/blas.gemm.$dt.yaml
        cp "$shipped" "$dir/variants/$dt-before.yaml"
        "$PY" -m tessera logic merge "$shipped" "$dir/tune/sm_90/blas.gemm.$dt.yaml" \
            -o "$dir/variants/$dt-narrow.yaml" > "$dir/merge-$dt.txt" 2>&1 || { cat "$dir/merge-$dt.txt"; continue; }
        own=$("$PY" benchmarks/logic_moves.py "$shipped" "$dir/variants/$dt-narrow.yaml" --ms "${OWN_MS:-384,640,768}" \
            --sides "${OWN_SIDES:-3072,4096,5120,11008,13824,14336}" --ks "${OWN_KS:-3072,4096,5120,11008,13824,14336}" \
            ${OWN_SAMPLE:+--sample "$OWN_SAMPLE" --seed 65} 2> "$dir/$dt-own-moves.txt")
        drawn=$("$PY" benchmarks/logic_moves.py "$shipped" "$dir/variants/$dt-narrow.yaml" \
            --ms "${DRAW_MS:-320,448,576,704,896,1024}" --sides "${DRAW_SIDES:-3072,5120,6144,11008,13824}" \
            --ks "${DRAW_KS:-3072,5120,6144,11008,13824}" --sample 20 --seed 64 2> "$dir/$dt-drawn-moves.txt")
        short=
        [ "${SHORT_SAMPLE:-12}" = 0 ] || short=$("$PY" benchmarks/logic_moves.py "$shipped" "$dir/variants/$dt-narrow.yaml" \
            --ms "${SHORT_MS:-16,32,64,96,128,160,192,256,320,384,448,640}" \
            --sides "${SHORT_SIDES:-512,1024,1536,2048,3072,4096}" --ks "${SHORT_KS:-256,512,1024,1536}" \
            --sample "${SHORT_SAMPLE:-12}" --seed 67 2> "$dir/$dt-short-moves.txt")
        shapes=$(printf '%s\n' $own $drawn $short | paste -sd, -)  # each a comma-separated list or empty
        if [ -n "$shapes" ]; then
            echo "$shapes" > "$dir/$dt-shapes.txt"
        else
            echo "$dt: no shape moved" | tee -a "$dir/summary.txt"
        fi
    done
    # this folder now has what prefillab reads: <dtype>-shapes.txt, variants/<dtype>-{before,narrow}.yaml
    ROWS=$dir AFTER=narrow CONTROL=1 AB_S=${AB_S:-150} prefillab
}

order() {  # whether a time depends on what ran before it (fixed call orders in the A/Bs and bench)
    capped 200 order-no-warmup "$PY" benchmarks/order_probe.py "$dir/order-no-warmup.json" --rounds 4 \
        --warmup-replays 0
    capped 250 order "$PY" benchmarks/order_probe.py "$dir/order.json" --rounds 4
}

gemvb() {
    capped 150 gemv-batched "$PY" benchmarks/gemv_batched_probe.py "$dir/gemv-batched.json" --rounds 2
    # 171 of the 187 tests took 100 s on the H200 (eightieth session), the cap then
    capped 240 repeat-tests "$PY" -m pytest tests/test_blas_repeat.py tests/test_launch.py -q -rs \
        --junitxml="$dir/repeat-tests.xml"
}

l12() {  # the issue's level-1/2 rows (tessera bench blas's full preset) and the gemv tile sweep
    capped 300 level12 "$PY" benchmarks/blas_level12.py "$dir/blas-l12.json"
}

rawab() {  # replays through the kernel's C launcher (TESSERA_RAW_LAUNCH=1, the default) against
    # Triton's wrappers (0), alternating: host cost of repeat calls, then back-to-back GEMMs
    local round r shape
    for round in a b; do
        for r in 0 1; do
            TESSERA_RAW_LAUNCH=$r capped 90 host-raw$r$round "$PY" benchmarks/host_overhead.py \
                "$dir/host-raw$r$round.json"
        done
    done
    for round in a b; do
        for r in 0 1; do
            for shape in "bf16 1024" "tf32 1024" "bf16 2048"; do
                set -- $shape
                TESSERA_RAW_LAUNCH=$r capped 60 "bench-raw$r$round-$1-$2" "$PY" -m tessera bench gemm \
                    -m "$2" -n "$2" -k "$2" --dtype "$1" --rounds 3 --json "$dir/bench-raw$r$round-$1-$2.json"
            done
        done
    done
}

quanttests() {  # every test of the quantized GEMMs on the GPU (gemm_wq's out= recipes among them)
    capped 300 quantized-tests "$PY" -m pytest tests/test_quantized.py -q -rs --junitxml="$dir/quantized.xml"
}

tf32overlap() {  # tf32 with a row-major B: its K-major copy in panels beside the GEMM (a probe)
    capped 200 overlap-8192 "$PY" benchmarks/tf32_copy_overlap.py "$dir/overlap-8192.json" --size 8192
    capped 200 overlap-16384 "$PY" benchmarks/tf32_copy_overlap.py "$dir/overlap-16384.json" --size 16384
}

fuzz() {  # the signature fuzzers on the GPU (fuzz_level1, fuzz_level2 and fuzz_matmul never ran on
    # one; fuzz_gemm not since the epilogue's scalars changed; fuzz_quantized's scaled half cut short)
    capped 130 fuzz-gemm "$PY" benchmarks/fuzz_gemm.py --device cuda --seconds 80
    capped 100 fuzz-level1 "$PY" benchmarks/fuzz_level1.py --device cuda --seconds 50
    capped 110 fuzz-level2 "$PY" benchmarks/fuzz_level2.py --device cuda --seconds 60
    capped 90 fuzz-matmul "$PY" benchmarks/fuzz_matmul.py --device cuda --seconds 45
    capped 110 fuzz-scaled "$PY" benchmarks/fuzz_quantized.py --device cuda --op scaled --seconds 60
}

tf32transform() {  # tf32 with B transposed and both operands rounded in shared memory (a probe)
    capped 300 transform "$PY" benchmarks/tf32_transform_probe.py "$dir/transform.json" \
        --configs 128x256x32:3:8:8:2,256x128x32:3:8:8:2
}

unmarked() {  # the tf32 probe, then the tests no other stage runs on a GPU
    capped 100 tf32-rounding "$PY" benchmarks/tf32_rounding_probe.py "$dir/tf32-rounding.json"
    capped 300 l12-rand "$PY" -m pytest tests/test_blas_level12.py tests/test_rand.py -q -rs -m "not gpu" \
        --junitxml="$dir/l12-rand.xml"
    capped 100 tf32-tests "$PY" -m pytest tests/test_gemm.py tests/test_gemm_gpu.py -q -rs -k tf32 \
        --junitxml="$dir/tf32-tests.xml"
}

pack() {  # the GPU's state and all of WORK, one tarball (a device call brings back at most 8 files)
    nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$WORK/gpu.txt" 2>&1
    tar czf "$OUT/r.tgz" -C "$WORK" .
}

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
for stage in "$@"; do
    case ${stage#*/} in verify|tests|rest|tf32|fp32|rows|first|host|grid|nt|fp32logic|fp32big|pdlws|pdlwq|cluster|symv|quant|fault|wqfix|wqtune|l1map|wqpdl|l12|logicab|halves|ncutf32|ncufp32|fp32order|products|productsbench|fp32preset|promote|smallgemm|longk|logicrows|longkfix|wavesfresh|prefill|prefillab|narrowm|order|tf32waves|waveexp|gemvb|rawab|quanttests|tf32overlap|fuzz|unmarked|tf32transform) ;;
        *) echo "unknown stage $stage (verify, tests, rest, tf32, fp32, rows, first, host, grid, nt," \
                "fp32logic, fp32big, pdlws, pdlwq, cluster, symv, quant, fault, wqfix, wqtune, l1map, wqpdl, l12, logicab," \
                "halves, ncutf32, ncufp32, fp32order, products, productsbench, fp32preset, promote, smallgemm, longk, logicrows," \
                "longkfix, wavesfresh, prefill, prefillab, narrowm, order, tf32waves, waveexp, gemvb, rawab," \
                "quanttests, tf32overlap, fuzz, unmarked, tf32transform)"; exit 2;; esac
done
for named in "$@"; do
    stage=${named#*/}
    if [ "$stage" != "$named" ] && [[ "$gpu_name" != *"${named%%/*}"* ]]; then
        echo "== $stage skipped: not on ${named%%/*} ($gpu_name)" | tee -a "$WORK/summary.txt"
        continue
    fi
    dir=$WORK/$stage
    mkdir -p "$dir"
    echo "== $stage at $rev on $gpu_name"
    "$stage"
    pack  # after every stage: a call cut at its time limit still brings back the stages it finished
done
pack
