"""Every kernel of the Triton goldens (tests/golden/emit_triton_*.loop), their grouped kernels, and two
candidate configs of their matmul templates (max-autotune), compiles to an sm_90 cubin
without a GPU (triton.compile with an explicit GPUTarget never touches the driver): the PTX entry
has one parameter per non-constexpr argument plus Triton 3.6's two scratch pointers (the launch ABI
the C++ launcher packs), and ptxas reports no spills. Kernels with check_index compile in debug
mode, as the runtime compiles them."""
import os
import re
import subprocess
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from ember._C import codegen  # noqa: E402
from ember._triton import interpret  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("this process interprets Triton kernels; cubins need the compiler", allow_module_level=True)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
TARGET = GPUTarget("cuda", 90, 32)


def golden_kernels():
    """(kernel, config, no_spills) per kernel of every golden with its first config, and of max-autotune's
    matmul templates the first config and the one with the most shared memory (it must fit the H200's);
    only the first must not spill (the tuner times the others; a spilling one just loses)."""
    cases = []
    for path in sorted(GOLDEN.glob("emit_triton_*.loop")):
        emitted = codegen.emit_triton(path.read_text(), schedule=True)
        for k, kernel in enumerate(emitted["kernels"]):
            cases.append(pytest.param(kernel, kernel["configs"][0], True, id=f"{path.stem}-{k}"))
        # Grouped kernels are formed after planning (the pipeline's group step): emit_triton_group's.
        for k, kernel in enumerate(codegen.emit_triton(path.read_text(), schedule=True, grouped=True)["kernels"]):
            if kernel["kind"] == "group":
                cases.append(pytest.param(kernel, kernel["configs"][0], True, id=f"{path.stem}-grouped{k}"))
        templates = codegen.emit_triton(path.read_text(), schedule=True, matmul_templates=True, max_configs=8)
        for t in templates["matmul_templates"]:
            configs = t["kernel"]["configs"]
            for c in sorted({0, max(range(len(configs)), key=lambda i: shared_bytes(configs[i]))}):
                cases.append(pytest.param(t["kernel"], configs[c], c == 0, id=f"{path.stem}-template-config{c}"))
    return cases


def shared_bytes(config):
    """A matmul config's pipelined tiles of A and B (2-byte or 4-byte: the ranking is the same)."""
    b = config["blocks"]
    return config["num_stages"] * (b["BLOCK_M"] + b["BLOCK_N"]) * b["BLOCK_K"]


def entry_params(ptx, name):
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    assert m, f"no .entry {name} in the PTX"
    return re.findall(r"\.param\s+\.(\w+)", m.group(1))


@pytest.mark.parametrize("kernel, config, no_spills", golden_kernels())
def test_compiles_for_sm90(kernel, config, no_spills, tmp_path):
    fn = interpret.load(kernel["source"], kernel["name"])
    signature = dict(kernel["signature"])
    src = ASTSource(fn, signature, constexprs=dict(config["blocks"]))
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"],
               "debug": bool(kernel["check_sites"])}
    compiled = triton.compile(src, target=TARGET, options=options)
    ptx = compiled.asm["ptx"]
    params = entry_params(ptx, compiled.metadata.name)
    non_constexpr = [name for name, ty in kernel["signature"] if ty != "constexpr"]
    assert len(params) == len(non_constexpr) + 2, params
    sizes = {"*": "u64", "i32": "u32", "i64": "u64", "i1": "u8"}
    for (name, ty), got in zip([s for s in kernel["signature"] if s[1] != "constexpr"], params):
        assert got == sizes["*" if ty.startswith("*") else ty], (name, ty, got)
    assert params[-2:] == ["u64", "u64"]  # global_scratch, profile_scratch
    assert compiled.metadata.shared <= 232448
    assert compiled.metadata.global_scratch_size == 0
    ptx_file = tmp_path / "k.ptx"
    ptx_file.write_text(ptx)
    log = subprocess.run([str(PTXAS), "-v", "--gpu-name=sm_90a", str(ptx_file), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True, timeout=120)
    assert log.returncode == 0, log.stderr
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", log.stderr)]
    assert spills and (max(spills) == 0 or not no_spills), log.stderr
