"""``kvdsl kivi``: a decode session over KIVI's 2-bit (or 4-bit) cache, contiguous or paged, read
by ``attend``, checked step by step against the reference (:func:`kvdsl.harness.kivi.session`)."""

from __future__ import annotations

import argparse

from kvdsl.cli.options import command, count, positive


def cmd_kivi(args: argparse.Namespace) -> int:
    """Run a decode session over KIVI's cache and check every step.

    Keep KIVI's 2-bit (or 4-bit) cache of a few sequences on the GPU (or in the interpreter): a
    prompt, then one token a step, appended into the f16 residual and flushed into the quantised
    groups (contiguous, or pages through a shuffled page table) whenever a group fills; every
    step attends the new token's query over the cache through attend (its keys split into the
    chunks plan picks, merged by attend_merge). Each flush's cache words are checked against the
    reference's layout (a code a step off, as a GPU's division may round it, is accepted in a
    few codes; stats bit for bit), each attention output against float64 attention over the
    cache the device keeps (decoded by the reference), within the f32 bound of its logits plus
    attend's tolerance (5e-5 of 1 + |x|).
    """
    from kvdsl import interp
    from kvdsl.harness.kivi import session

    if args.backend == "gpu":
        from kvdsl.runtime import run
    else:
        run = interp.run
    result = session(
        run,
        kv_heads=args.kv_heads,
        q_heads=args.q_heads,
        head_dim=args.head_dim,
        group=args.group,
        bits=args.bits,
        batch=args.batch,
        prompt=args.prompt,
        steps=args.steps,
        paged=args.layout == "paged",
        page_size=args.page_size,
        seed=args.seed,
    )
    where = f"pages of {args.page_size}" if args.layout == "paged" else "contiguous"
    print(
        f"kivi {args.bits}-bit, group {args.group}, {where}, {args.batch} sequences x "
        f"{args.kv_heads} kv heads x head dim {args.head_dim}, {args.q_heads} query heads "
        f"({args.backend}): {result.line()}"
    )
    return 0 if result.mismatches == 0 and result.cache_mismatches == 0 else 1


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``kivi`` to the subcommands ``sub``."""
    s = command(sub, cmd_kivi)
    s.add_argument("--steps", type=count, default=1000, help="decode steps after the prompt")
    s.add_argument("--prompt", type=positive, default=37)
    s.add_argument("--batch", type=positive, default=2)
    s.add_argument("--kv-heads", type=positive, default=2)
    s.add_argument("--q-heads", type=positive, default=4)
    s.add_argument("--head-dim", type=positive, default=64)
    s.add_argument("--bits", type=int, choices=(2, 4), default=2)
    s.add_argument("--group", type=positive, default=32,
                   help="K's tokens (and V's channels) a scale")  # fmt: skip
    s.add_argument("--layout", choices=("contiguous", "paged"), default="contiguous")
    s.add_argument("--page-size", type=positive, default=64,
                   help="tokens per page (paged): a multiple of the group, a power of two from "
                   "16 to 256")  # fmt: skip
    s.add_argument("--backend", choices=("gpu", "interp"), default="gpu")
    s.add_argument("--seed", type=count, default=21)
