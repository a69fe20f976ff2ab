"""The executor's fast loop written out as one function per plan.

A loop over the plan's program pays, per step, for unpacking its entry, calling its gather and
looping over the slots it frees: 0.17 us.  The same steps written out as straight-line code (each
kernel a name of its own, every slot index a constant) take 0.06 us: the executor's own time in a
BERT-style encoder's 67 steps 11.1 -> 4.3 us an inference.  The generated function keeps the
loop's semantics: a kernel of several outputs may return fewer than the step has (those nobody
reads), one of a single output may return it alone or in a tuple; and a failing kernel is
reported through `failed(k, exc, slots)` (k: its entry in the program), as the loop reported it.

Writing it out costs Python's compiler 25-30 us a step (3 ms for 100 steps), what the loop loses
in 250 runs: a plan runs its loop first and is written out at its WRITE_OUT_AFTER-th run, so that
a single inference (`irrun infer`) never pays for it and a long run soon stops paying the loop.
That run takes the compiler's time once, in one piece (compile holds the GIL): plans of more than
WRITE_OUT_MOST_STEPS steps keep the loop, so that no run of a long run stalls for more than about
60 ms (a 6,000-step plan took 188 ms to write out).
"""
from __future__ import annotations

from typing import Callable

WRITE_OUT_AFTER = 100
WRITE_OUT_MOST_STEPS = 2000


def straight_line(program: list[tuple], inputs: list[list[int]], failed: Callable) -> Callable[[list], None]:
    """run(slots) doing what the loop over `program` does; `inputs[k]`: the slots entry k reads.
    Entries are (kernel, gather, spread, single output slot or None, output slots, slots freed).
    (A failing step is found by the line it failed at, not by a counter each step would set.)"""
    names: dict = {"failed": failed}
    lines = ["def run(slots):", "    try:"]
    step_at_line = [0] * (len(lines) + 1)   # (line numbers count from 1)
    for k, ((kernel, _gather, spread, single, outs, free), reads) in enumerate(zip(program, inputs)):
        arguments = ", ".join(f"slots[{s}]" for s in reads) if spread else f"slots[{reads[0]}]"
        check = getattr(kernel, "kernel_for", None)     # (a step checked first: irrun/shape_check.py)
        if check is None:
            names[f"kernel{k}"] = kernel
            lines.append(f"        out = kernel{k}({arguments})")
        else:
            names[f"check{k}"] = check
            lines += [f"        args = ({arguments},)", f"        out = check{k}(args)(*args)"]
        if single is not None:
            lines.append(f"        slots[{single}] = out[0] if type(out) is tuple else out")
        else:
            names[f"outs{k}"] = outs
            lines += [f"        for s, v in zip(outs{k}, out if type(out) is tuple else (out,)):",
                      "            slots[s] = v"]
        lines += [f"        slots[{s}] = None" for s in free]
        step_at_line += [k] * (len(lines) + 1 - len(step_at_line))
    if not program:
        lines.append("        pass")
    names["step_at_line"] = step_at_line
    lines += ["    except Exception as exc:  # noqa: BLE001 - any kernel failure is reported at its layer",
              "        raise failed(step_at_line[exc.__traceback__.tb_lineno], exc, slots) from None"]
    exec(compile("\n".join(lines), "<irrun fast loop>", "exec"), names)
    return names["run"]
