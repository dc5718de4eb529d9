"""``codegrep train``, ``codegrep ablation study``, ``codegrep curves`` and ``codegrep export``."""
from __future__ import annotations

import argparse
from typing import Any


def _train(args: argparse.Namespace) -> int:
    from codegrep.config import parse_overrides
    from codegrep.rl.training_run import train_command

    overrides: dict[str, Any] = parse_overrides(args.set or [])
    for key in ("efficiency_layer", "efficiency_lambda", "seed", "out", "name", "max_steps"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    if args.resume:
        overrides["resume"] = True
    run_dir = train_command(args.config, overrides)
    print(run_dir)
    return 0


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from codegrep.rl.export import export_run

    from codegrep.errors import UserError

    run = Path(args.run)
    if not run.is_dir():
        run = Path(args.runs_dir) / args.run
    if not run.is_dir():  # it said '<runs-dir>/RUN/final has no trained model', a path the user never named
        raise UserError(f"{args.run}: no such run directory (nor a run of that name under --runs-dir {args.runs_dir})")
    print(export_run(run, args.out))
    return 0


def _input_file(config: str | None) -> Any:
    """The file a ``--profile``/``--config`` argument reads: a YAML path as given, a profile name's
    ``configs/<name>.yaml`` (``None`` when not given), for ``refuse_overwriting_inputs``."""
    from pathlib import Path

    from codegrep.config import profile_path

    if config is None or Path(config).suffix in (".yaml", ".yml"):
        return config
    return profile_path(config)


def _study(args: argparse.Namespace) -> int:
    import shlex
    import sys

    from codegrep.errors import UserError
    from codegrep.files import output_dir, output_file
    from codegrep.rl.study import run_study

    if args.first_seed >= args.seeds:  # seeds FIRST_SEED..N-1: none to train
        raise UserError(f"--first-seed {args.first_seed}: must be below --seeds {args.seeds}, or no seed is "
                        "trained (--resume reuses finished seeds)")
    output_dir(args.out, "--out")  # before hours of training, not after
    if args.result:
        from codegrep.files import refuse_overwriting_inputs

        refuse_overwriting_inputs({"--result": args.result}, {"--config": _input_file(args.config)})  # (written last)
        output_file(args.result, "--result")

    command = "codegrep " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["ablation"] else \
        f"codegrep ablation study --config {args.config} --seeds {args.seeds} --out {args.out}" + \
        (" --resume" if args.resume else "") + (f" --result {args.result}" if args.result else "") + \
        (f" --first-seed {args.first_seed}" if args.first_seed else "")
    doc = run_study(args.config, args.seeds, args.out, resume=args.resume, result=args.result, command=command,
                    first_seed=args.first_seed)
    print(doc["verdict_sentence"])
    print(f"wrote {args.out}/ablation_study.json" + (f" and {args.result}" if args.result else ""))
    return 0


def _panel_names() -> list[str]:
    from codegrep.rl.panels import PANELS

    return list(PANELS)


def _panels(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in _panel_names()]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown column(s) {unknown or [text]}; choose from {', '.join(_panel_names())}")
    return names


def _curves(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from codegrep import plots
    from codegrep.files import output_file
    from codegrep.rl.training_stage import curves_figure, metrics_frame, non_numbers

    from codegrep.errors import UserError

    out = output_file(args.out)
    if out.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--out {out}: give a .png or .svg file")
    runs: dict[str, Any] = {}
    for run in args.runs:
        path = Path(run)
        if not path.is_dir():
            raise UserError(f"{run}: not a training run directory (expected a folder with metrics.jsonl)")
        frame = metrics_frame(path)
        if frame.empty:
            raise UserError(f"{path / 'metrics.jsonl'}: no steps logged yet")
        name = path.resolve().name
        runs[name if name not in runs else str(path)] = frame
        for col in args.panels:  # said here too: a note on a panel is easily missed
            if why := non_numbers(frame, col):
                print(f"{path / 'metrics.jsonl'}: {why}; left out of the figure", file=sys.stderr)
    fig = curves_figure(runs, args.panels)
    plots.save(fig, out)
    print(f"wrote {out} ({len(runs)} run{'s' if len(runs) > 1 else ''}, panels {','.join(args.panels)})")
    return 0


def register(subparsers: Any) -> None:
    from codegrep.argtypes import non_negative_float, non_negative_int, positive_int
    from codegrep.rl.advantages import LAYERS
    p = subparsers.add_parser(
        "train", help="warm-start (SFT) and GRPO-train the retrieval agent (TRL); see docs/training.md",
        description="Train the retrieval agent: a supervised warm start on demonstrations (synthetic scripted "
                    "episodes and/or real recorded runs), then GRPO on the profile's train split with live tools. "
                    "Episode limits come from the profile's agent: section. Writes OUT/NAME/ (config.json, "
                    "manifest.json, metrics.jsonl, final/). Instances of the evaluation split never reach training.")
    p.add_argument("--config", default="smoke",
                   help="train YAML (configs/train/*.yaml; its 'profile' key names the profile) or a profile name/YAML "
                        "(its train.config names the train YAML; the run is that profile's)")
    p.add_argument("--efficiency-layer", dest="efficiency_layer",
                   choices=list(LAYERS),
                   help="where the efficiency signal enters (default: the train YAML's efficiency_layer)")
    p.add_argument("--efficiency-lambda", dest="efficiency_lambda", type=non_negative_float,
                   help="λ, the efficiency coefficient (default: the train YAML's)")
    p.add_argument("--seed", type=non_negative_int, help="seed of every random source (default: the train YAML's seed)")
    p.add_argument("--out", help="runs directory (the run goes to OUT/NAME)")
    p.add_argument("--name", help="run name (default <profile>-<layer>-lam<λ>-s<seed>)")
    p.add_argument("--max-steps", dest="max_steps", type=positive_int, help="GRPO steps (default: the train YAML's max_steps)")
    p.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="any CodeGrepArgs / TRL GRPOConfig field, e.g. --set num_generations=4 (repeatable); KEY= "
                        "(empty) is null, taken only where the field takes null (train_tasks= : every task)")
    p.set_defaults(func=_train)
    ab = subparsers.add_parser("ablation", help="the efficiency-layer ablation outside the notebooks (see notebook 04)")
    ab_sub = ab.add_subparsers(dest="ablation", required=True)
    st = ab_sub.add_parser(
        "study", help="paired reward/advantage arms over N seeds, per-seed results written as they finish",
        description="The efficiency-layer ablation's paired endpoint (advantage/reward exact probe KL) over seeds "
                    "0..N-1. Each finished seed is written atomically to OUT/seeds/; --resume continues a cut-short "
                    "run after checking the reused seeds were produced with the same settings. A train YAML with "
                    "'model: tiny' is the MECHANISM STUDY on a tiny random-init Llama (codegrep.rl.tiny_policy).")
    st.add_argument("--config", default="configs/train/mechanism.yaml",
                    help="train YAML with the ablation_* keys (default %(default)s: the mechanism study)")
    st.add_argument("--seeds", type=positive_int, default=10, help="paired seeds 0..N-1 (default %(default)s)")
    st.add_argument("--out", default="artifacts/ablation_study", help="study folder (default %(default)s)")
    st.add_argument("--resume", action="store_true", help="reuse finished seeds in OUT (same settings only)")
    st.add_argument("--first-seed", dest="first_seed", type=non_negative_int, default=0,
                    help="train seeds FIRST_SEED..N-1 only (another process may run the others in the same OUT); "
                         "the result covers every finished seed below N")
    st.add_argument("--result", help="also write the result JSON here (e.g. docs/results/ablation_study.json)")
    st.set_defaults(func=_study)
    c = subparsers.add_parser(
        "curves", help="plot training runs' per-step curves (KL drift, rounds, tokens, rollout time) from metrics.jsonl",
        description="Draw one panel per metrics.jsonl column, one line per run (e.g. the reward- and advantage-layer "
                    "arms of the ablation, or seeds), and save it as PNG or SVG. Columns: "
                    + ", ".join(_panel_names()) + ".")
    c.add_argument("runs", nargs="+", metavar="RUN_DIR", help="training run directories (each with metrics.jsonl)")
    c.add_argument("--out", required=True, help="figure file (.png or .svg)")
    c.add_argument("--panels", type=_panels, default="task_reward,kl,rounds,tokens,time_generation_s",
                   help="comma-separated metrics.jsonl columns (default %(default)s)")
    c.set_defaults(func=_curves)
    e = subparsers.add_parser("export", help="write a trained run's policy as a HF model dir with a model card")
    e.add_argument("run", help="run directory, or a run name under --runs-dir")
    e.add_argument("--runs-dir", default="artifacts/train", help="where run names are looked up (default %(default)s)")
    e.add_argument("--out", help="output directory (default RUN/export)")
    e.set_defaults(func=_export)


def _bench(args: argparse.Namespace) -> int:
    from codegrep.errors import UserError
    from codegrep.files import json_text
    from codegrep.rl.bench import bench_train

    if args.sft_min_tokens > args.sft_max_tokens:
        raise UserError(f"--sft-min-tokens {args.sft_min_tokens} is above --sft-max-tokens {args.sft_max_tokens}")
    if args.scored_share > 1:
        raise UserError(f"--scored-share {args.scored_share}: a share of a row's positions, at most 1")
    print(json_text(bench_train(sft_demos=args.sft_demos, sft_min_tokens=args.sft_min_tokens,
                                 sft_max_tokens=args.sft_max_tokens, sft_batch=args.sft_batch, group=args.group,
                                 prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens, turns=args.turns,
                                 obs_tokens=args.obs_tokens, loss_tokens=args.loss_tokens, repeats=args.repeats,
                                 cpu_precision=args.cpu_precision, skip_sft=args.skip_sft, seed=args.seed,
                                 scored_share=args.scored_share)))
    return 0


def _demo_choice(value: str) -> str:
    """``--choice``: one of the scripted strategies (imported only when the flag is given, not at CLI start-up)."""
    from codegrep.retrievers.scripted import STRATEGIES

    if value not in STRATEGIES:
        raise argparse.ArgumentTypeError(f"{value!r}: expected one of {list(STRATEGIES)}")
    return value


def register_bench(bench_subparsers: Any) -> None:
    from codegrep.agent.precision import PRECISIONS
    from codegrep.argtypes import non_negative_int, positive_float, positive_int
    from codegrep.config import add_set_option

    p = bench_subparsers.add_parser(
        "train", help="SFT / GRPO generation / loss tokens/s of the 135M policy: all-off baseline vs fast path, "
                      "beside the FLOP/s and memory-bandwidth limits",
        description="Prints one JSON object: sft_speedup and generation_speedup (fast path over the all-off "
                    "baseline, measured in the same run), head.labelled_only_speedup (TRL's fused LM head on "
                    "labelled positions only against every position, on CPU), each rate beside its limit "
                    "(limit_flops, limit_bandwidth) "
                    "and the ratio, a step breakdown, the CPU's features and the chosen precision. A few minutes "
                    "on 2 cores at the defaults.")
    p.add_argument("--sft-demos", type=positive_int, default=8, help="generated SFT demonstrations (default 8)")
    p.add_argument("--sft-min-tokens", type=positive_int, default=160, help="shortest demonstration (tokens)")
    p.add_argument("--sft-max-tokens", type=positive_int, default=640, help="longest demonstration (tokens)")
    p.add_argument("--sft-batch", type=positive_int, default=4, help="SFT batch size (both arms; smoke uses 4)")
    p.add_argument("--group", type=positive_int, default=4, help="GRPO group size G (sequences per prompt)")
    p.add_argument("--prompt-tokens", type=positive_int, default=384, help="rollout prompt length (tokens)")
    p.add_argument("--new-tokens", type=positive_int, default=24, help="tokens generated per turn")
    p.add_argument("--turns", type=positive_int, default=2, help="turns per rollout")
    p.add_argument("--obs-tokens", type=positive_int, default=48, help="observation tokens appended per turn")
    p.add_argument("--loss-tokens", type=positive_int, default=256, help="sequence length of the loss batch")
    p.add_argument("--repeats", type=positive_int, default=2, help="loss measurements per precision (median)")
    p.add_argument("--scored-share", type=positive_float, default=0.5,
                   help="head arm: share of each loss row's positions that carry a label, the rest a prompt (a "
                        "smoke GRPO row's completion is about half of it, a demonstration's assistant turns about "
                        "a fifth); TRL's CPU head over every position against labelled positions only (head.*)")
    p.add_argument("--cpu-precision", choices=PRECISIONS, default="auto",
                   help="the fast path's precision (default auto: bf16 where the CPU has native bf16)")
    p.add_argument("--skip-sft", action="store_true", help="skip the SFT arms (the slowest part)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="sampling seed")
    p.set_defaults(func=_bench)
    d = bench_subparsers.add_parser(
        "demos", help="warm-start P@1 on held-out real TRAIN tasks against the number of real train tasks "
                      "demonstrated (is the number of real issues what bounds the agent?)",
        description="For each --tasks size: scripted-expert demonstrations (rejection sampled) of that many real "
                    "train tasks, a warm start with the train YAML's SFT settings, greedy evaluation on --dev "
                    "held-out real train tasks (never an evaluation instance). Prints one JSON object: P@1 per "
                    "size with a Wilson interval, the expert's own P@1 on the same dev tasks, times. Small sample; "
                    "minutes per point on 2 cores (SFT dominates). Points are cached under --out.")
    d.add_argument("--profile", default="smoke", help="profile whose agent/env sections and train split apply")
    add_set_option(d, "agent.min_greps=8")
    d.add_argument("--config", help="train YAML whose SFT settings apply (default: the profile's train.config)")
    d.add_argument("--tasks", type=_sizes, default=[10, 20, 40],
                   help="comma-separated numbers of real train tasks (default 10,20,40)")
    d.add_argument("--dev", type=positive_int, default=15, help="held-out real train tasks evaluated (default 15)")
    d.add_argument("--seed", type=non_negative_int, default=0, help="seed of the dev split and task order")
    d.add_argument("--first-turn", type=non_negative_int, default=None, metavar="N",
                   help="turn-1-only demonstrations from other repositories added to every point (default: the train "
                        "YAML's first_turn_demos)")
    d.add_argument("--choice", type=_demo_choice, default=None, metavar="{first-listed,oracle-shown}",
                   help="which file the expert's demonstrations submit (default: the train YAML's demo_choice; "
                        "oracle-shown = hindsight, a gold file the observation showed)")
    d.add_argument("--out", default="artifacts/bench/demos", help="cache of the points' models and rows")
    d.add_argument("--result", help="also write the JSON here (e.g. docs/results/bench_demos.json), and its figure beside it (.png)")
    d.set_defaults(func=_bench_demos)
    q = bench_subparsers.add_parser(
        "policies", help="a finished run's warm start vs its GRPO policy on the real TRAIN tasks it never used "
                         "(the train-side check of which policy to keep)",
        description="Evaluates a run's two policies greedily on the profile's real train tasks that were neither a "
                    "demonstration nor a GRPO prompt of the run (never an evaluation instance), beside the scripted "
                    "expert. Prints one JSON object: P@1 of each with a Wilson interval, paired wins/losses, an exact "
                    "sign test, and which policy the check keeps. Small sample; minutes on 2 cores.")
    q.add_argument("--run", required=True, help="a finished run directory (config.json, manifest.json, final/)")
    q.add_argument("--profile", help="profile whose agent/env sections and train split apply (default: the run's)")
    add_set_option(q, "agent.max_turns=2")
    q.add_argument("--limit", type=positive_int, help="at most this many unused tasks (by id)")
    q.add_argument("--out", default="artifacts/bench/policies", help="cache of the evaluation rows")
    q.add_argument("--result", help="also write the JSON here (e.g. docs/results/policy_check.json)")
    q.set_defaults(func=_bench_policies)
    c = bench_subparsers.add_parser(
        "decode", help="agent evaluation time: rows leaving the batch + early stop + length-sorted batches vs "
                       "transformers' generate, same model and real TRAIN tasks",
        description="Runs the agent greedily on --tasks seeded real train tasks twice in one process: the baseline "
                    "(model.generate, no early stop, tasks in seeded order) and the profile's path (codegrep/agent/"
                    "decode_bench.py). With --batch-sizes, the profile's path at each batch size instead (seconds "
                    "and peak resident memory of each); with --decode-precisions, at each decoding precision; with "
                    "--attention, with each decoding attention. Prints one JSON object: seconds, speedup, tokens, P@1 "
                    "of each arm.")
    c.add_argument("--profile", default="smoke", help="profile whose agent/env sections and train split apply")
    add_set_option(c, "agent.draft_tokens=0")
    c.add_argument("--model", default="smollm2", help="model directory or name (e.g. a run's final/ directory)")
    c.add_argument("--tasks", type=positive_int, default=32, help="real train tasks (default 32)")
    c.add_argument("--seed", type=non_negative_int, default=0, help="seed of the task sample")
    c.add_argument("--batch-sizes", type=positive_int, nargs="+", metavar="N",
                   help="compare the profile's path at these agent.batch_size values (smallest first) instead of "
                        "against the baseline, e.g. --batch-sizes 8 16")
    c.add_argument("--decode-precisions", nargs="+", metavar="P", choices=("fp32", "auto", "bf16"),
                   help="compare the profile's path decoding in these agent.decode_precision values (the first is "
                        "the reference of identical episodes and speedups) instead of against the baseline, e.g. "
                        "--decode-precisions fp32 bf16")
    c.add_argument("--attention", nargs="+", metavar="A", choices=("padded", "spans"),
                   help="compare the profile's path with these decoding attentions (the first is the reference): "
                        "padded = every row reads the batch's whole left-padded cache, spans = each group of rows "
                        "from its earliest non-padding slot (codegrep/agent/row_spans.py), e.g. --attention padded "
                        "spans")
    c.add_argument("--processes", type=positive_int, metavar="N",
                   help="compare one evaluation process (the profile's agent.cpu_threads) with N processes sharing "
                        "the same batches (agent.eval_processes; the cores split evenly), each through agent_rows: "
                        "seconds, speedup, peak memory of all processes, identical rows; e.g. --processes 2")
    c.add_argument("--result", help="also write the JSON here")
    c.set_defaults(func=_bench_decode)


def _bench_decode(args: argparse.Namespace) -> int:
    import json

    from codegrep.agent.decode_bench import bench_decode
    from codegrep.agent.models import resolve_model
    from codegrep.config import cli_profile
    from codegrep.files import output_file, write_atomic

    if args.result:
        from codegrep.files import refuse_overwriting_inputs

        refuse_overwriting_inputs({"--result": args.result}, {"--profile": _input_file(args.profile)})
        output_file(args.result, "--result")  # before the work, not after
    from codegrep.errors import UserError

    given = [name for name, value in (("--processes", args.processes), ("--batch-sizes", args.batch_sizes),
                                      ("--decode-precisions", args.decode_precisions),
                                      ("--attention", args.attention)) if value]
    if len(given) > 1:
        raise UserError(f"{' and '.join(given)}: give one of them (each is its own comparison)")
    cfg = cli_profile(args.profile, args.set)
    if args.processes:
        from codegrep.agent.decode_bench import bench_processes

        doc = bench_processes(cfg, str(resolve_model(args.model)), args.tasks, args.seed, args.processes)
    else:
        doc = bench_decode(cfg, str(resolve_model(args.model)), args.tasks, args.seed, args.batch_sizes,
                           args.decode_precisions, args.attention)
    _record_overrides(doc, cfg)
    text = json.dumps(doc, indent=1)
    if args.result:
        write_atomic(args.result, text + "\n")
    print(text)
    return 0


def _record_overrides(doc: dict[str, Any], cfg: dict[str, Any]) -> None:
    """A benchmark's JSON records the ``--set`` overrides its profile ran with (``overrides``; absent when none).

    >>> doc = {}; _record_overrides(doc, {"_overrides": {"agent.max_turns": 2}}); doc
    {'overrides': {'agent.max_turns': 2}}
    """
    if cfg.get("_overrides"):
        doc["overrides"] = dict(cfg["_overrides"])


def _sizes(text: str) -> list[int]:
    """``--tasks``: comma-separated positive numbers.

    >>> _sizes("10, 20")
    [10, 20]
    """
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated positive numbers, e.g. 10,20,40")
    return sizes


def _bench_policies(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from codegrep.config import cli_profile
    from codegrep.files import output_dir, output_file, write_atomic
    from codegrep.rl.curve import run_record, unused_train_check

    if args.result:  # refusals before the work
        from codegrep.files import refuse_overwriting_inputs

        refuse_overwriting_inputs({"--result": args.result}, {"--profile": _input_file(args.profile),
                                                              "--run's config.json": Path(args.run) / "config.json"})
        output_file(args.result, "--result")
    output_dir(args.out, "--out")
    config = run_record(Path(args.run))[0]
    cfg = cli_profile(args.profile or config.get("codegrep", {}).get("profile") or "smoke", args.set)
    doc = unused_train_check(cfg, args.run, args.out, limit=args.limit)
    _record_overrides(doc, cfg)
    text = json.dumps(doc, indent=1)
    if args.result:
        write_atomic(Path(args.result), text + "\n")
    print(text)
    return 0


def _bench_demos(args: argparse.Namespace) -> int:
    import json

    from codegrep.config import cli_profile
    from codegrep.files import output_dir, output_file, write_atomic
    from codegrep.rl.curve import demos_curve

    if args.result:  # before the work, not after
        from codegrep.files import refuse_overwriting_inputs

        refuse_overwriting_inputs({"--result": args.result}, {"--profile": _input_file(args.profile),
                                                              "--config": _input_file(args.config)})
        output_file(args.result, "--result")
        from pathlib import Path

        from codegrep.errors import UserError

        if Path(args.result).suffix.lower() == ".png":  # the figure goes beside the JSON, as RESULT.png
            raise UserError(f"--result {args.result}: the figure is written beside the JSON as "
                            f"{Path(args.result).with_suffix('.png')}, which would replace it; give a .json path")
    if args.out:
        output_dir(args.out, "--out")
    cfg = cli_profile(args.profile, args.set)
    doc = demos_curve(cfg, args.config, args.tasks, args.dev, args.out, seed=args.seed, first_turn=args.first_turn,
                      choice=args.choice)
    _record_overrides(doc, cfg)
    text = json.dumps(doc, indent=1)
    if args.result:
        from pathlib import Path

        from codegrep.rl.curve import demos_figure

        write_atomic(args.result, text + "\n")
        demos_figure(doc).savefig(Path(args.result).with_suffix(".png"), dpi=130, bbox_inches="tight")
    print(text)
    return 0
