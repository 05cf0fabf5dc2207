"""Patch a copy of src/ so that consecutive decode attention calls overlap more (research
only; the variants are chosen at run time by environment variables, so one patched tree
times them all):

    python3 research/attention_overlap_variants.py /tmp/patched/src
    TG_PREFETCH_RUN=64 TG_MERGE_EARLY=1 PYTHONPATH=/tmp/patched/src python3 ...

TG_PREFETCH_RUN=n  before its griddepcontrol.wait each attention program asks L2 for up
                   to n tiles of its run's keys and values (prefetch.global.L2, a hint),
                   not only the first: the run streams in while the kernel before ends.
TG_MERGE_EARLY=1   the merge apart releases the next kernel before its wait, not after it:
                   the next call's attention launches while this call's still streams.
                   (Breaks _pdl.py's rule that only the kernel just before a PDL kernel can
                   still run; a probe of what it is worth, not a candidate as it stands.)

Why (research/attention_fixed_cost.py, H200, session 110): few-pair calls stream at 88-100%
of copy past a fixed 4-5.5 us a call, so the 16 MiB points read at 42-48% of copy.
"""

import sys
from pathlib import Path

EDITS = [
    ("                             RUNS_PRELOADED: tl.constexpr = False):",
     "                             RUNS_PRELOADED: tl.constexpr = False,\n"
     "                             PREFETCH_RUN: tl.constexpr = 0):"),
    ("        _prefetch_tile(v_ptr + kv_base, stride_cp, ahead, stop, HEAD_DIM, BLOCK_T, "
     "ROW_LINES,\n"
     "                       LINE_ELEMENTS)\n",
     "        _prefetch_tile(v_ptr + kv_base, stride_cp, ahead, stop, HEAD_DIM, BLOCK_T, "
     "ROW_LINES,\n"
     "                       LINE_ELEMENTS)\n"
     "        if PREFETCH_RUN > 1:\n"
     "            for t0 in range(ahead + BLOCK_T,\n"
     "                            tl.minimum(stop, ahead + PREFETCH_RUN * BLOCK_T), BLOCK_T):\n"
     "                _prefetch_tile(k_ptr + kv_base, stride_cp, t0, stop, HEAD_DIM, BLOCK_T,\n"
     "                               ROW_LINES, LINE_ELEMENTS)\n"
     "                _prefetch_tile(v_ptr + kv_base, stride_cp, t0, stop, HEAD_DIM, BLOCK_T,\n"
     "                               ROW_LINES, LINE_ELEMENTS)\n"),
    ("                        BLOCK_D: tl.constexpr, BLOCK_SPLITS: tl.constexpr):",
     "                        BLOCK_D: tl.constexpr, BLOCK_SPLITS: tl.constexpr,\n"
     "                        MERGE_EARLY: tl.constexpr = False):"),
    ("        tl.extra.cuda.gdc_wait()               # every run's partials are out\n"
     "        tl.extra.cuda.gdc_launch_dependents()\n",
     "        if MERGE_EARLY:\n"
     "            tl.extra.cuda.gdc_launch_dependents()\n"
     "        tl.extra.cuda.gdc_wait()               # every run's partials are out\n"
     "        if not MERGE_EARLY:\n"
     "            tl.extra.cuda.gdc_launch_dependents()\n"),
    ('    config.setdefault("MERGE_APART", False)\n',
     '    config.setdefault("MERGE_APART", False)\n'
     '    config["PREFETCH_RUN"] = int(os.environ.get("TG_PREFETCH_RUN", "0"))\n'),
    ('              BLOCK_SPLITS=config["BLOCK_SPLITS"], num_warps=4,\n',
     '              BLOCK_SPLITS=config["BLOCK_SPLITS"], num_warps=4,\n'
     '              MERGE_EARLY=os.environ.get("TG_MERGE_EARLY", "0") == "1",\n'),
    ("import functools\n", "import functools\nimport os\n"),
]


def main() -> None:
    path = Path(sys.argv[1]) / "tilegraph" / "kernels" / "decode_attention.py"
    text = path.read_text()
    for old, new in EDITS:
        if text.count(old) != 1:
            raise SystemExit(f"expected one {old!r} in {path}, found {text.count(old)}")
        text = text.replace(old, new)
    path.write_text(text)
    print(f"patched {path}")


if __name__ == "__main__":
    main()
